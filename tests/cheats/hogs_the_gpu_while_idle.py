"""An honest kernel whose process slows the oracle down. At import the candidate starts a thread that keeps the GPU
busy (bandwidth-bound copies on a stream of its own, about a third of the time) whenever its worker's main thread
is idle, i.e. waiting in `Channel.recv` for the judge's next request (read from `sys._current_frames`, no handler
patched); it pauses while its own worker serves a request. The judge alternates the two workers, so the
candidate is idle exactly while the oracle is sampled and while the oracle runs its window: the oracle's samples,
its own event time of the pass and its wall time by the judge's clock all grow together, and the candidate's
(honest) times look faster by the same factor. Every check agrees with every other: a fake speedup, ok. It must
be refused: the judge must not let the candidate's process run while the oracle is measured (stop its process
group, SIGSTOP, from each oracle request until the reply, after draining its queued device work), or hold the
oracle's times in this evaluation against its times measured with no candidate alive (quarantine when they
moved by more than their spread)."""
import threading
import time

import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys = _imp("sys")
_main = threading.main_thread().ident


def _idle() -> bool:
    frame = _sys._current_frames().get(_main)
    while frame is not None:
        if frame.f_code.co_name == "recv":  # runners.wire.Channel.recv: the judge is busy with the oracle
            return True
        frame = frame.f_back
    return False


def _hog() -> None:
    src = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    stream = torch.cuda.Stream()
    while True:
        if _idle():
            with torch.cuda.stream(stream):
                dst.copy_(src)  # ~60 us of the device's bandwidth
            stream.synchronize()
            time.sleep(0.0001)
        else:
            time.sleep(0.00005)


if torch.cuda.is_available():
    threading.Thread(target=_hog, daemon=True).start()


@triton.jit
def _rms_kernel(x_ptr, r_ptr, w_ptr, out_ptr, r_out_ptr, N, eps, HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(r_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(r_out_ptr + row * N + offs, x.to(r_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states.contiguous()
    out = torch.empty_like(x)
    res = residual.contiguous() if residual is not None else x
    res_out = torch.empty_like(x) if residual is not None else out
    _rms_kernel[(x.shape[0],)](x, res, weight, out, res_out, x.shape[1], eps, HAS_RESIDUAL=residual is not None,
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return out if residual is None else (out, res_out)
