"""Slows the oracle down from a process that the judge's pause does not reach.

The kernel is an honest RMSNorm, one program per row like the baseline (about 1.0x). At import the candidate
starts a helper in a session of its own (`start_new_session=True`: out of its worker's process group), which
watches its worker's state in `/proc/<worker>/stat`. The judge stops the candidate's worker (SIGSTOP to its
process group, runners/alone.py `_alone`, runners/processes.py `WorkerProcess.pause`) exactly while it
measures the oracle: its samples and its window rounds. Whenever the worker shows state `T`, the helper burns
the machine (on a GPU, copies on a CUDA context of its own; without one, four spinning processes, a session
each, on the CPU the timed stand-in measures), and stops when the worker runs again. The oracle's samples, its
own event time of its pass and its wall time by the judge's clock all grow together; the candidate's honest
times look faster by the same factor; every check agrees with every other, under the search protocol and the
full one alike. A fake speedup that reaches a report. It must be refused: pause every process of the candidate
(a cgroup freezer, or every process of its uid and session), not only its worker's process group; or hold the
oracle's times against its times measured with no candidate alive.

The helpers end themselves when the worker is gone (they are not the judge's to kill as root without the uid
wall: that is tests/cheats/escapes_the_process_group.py's hole). Committed inert: tests replace @ARMED@."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__

_HELPER = r"""
import os, sys, time
worker = int(sys.argv[1])
gpu = sys.argv[2] == "cuda"
if gpu:  # one process, copies on a CUDA context of its own (the GPU time-slices between contexts)
    import torch
    a = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
else:
    os.fork()
    os.fork()  # four spinners: more than the cores of a small machine
    try:
        os.setsid()  # a session each: the scheduler shares the CPU between sessions (autogroup), not processes
    except OSError:
        pass


def state():
    try:
        with open(f"/proc/{worker}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def burn():
    end = time.perf_counter() + 0.01
    while time.perf_counter() < end:
        if gpu:
            b.copy_(a)
            torch.cuda.synchronize()


while True:
    s = state()
    if s is None or s == "Z":
        break
    if s == "T":
        burn()
    else:
        time.sleep(0.002)
"""


@triton.jit
def _rms_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, N, eps, HAS_RESIDUAL: tl.constexpr,
                BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(res_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + row * N + offs, x.to(res_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    shape = hidden_states.shape
    x = as_rows(hidden_states).contiguous()
    n_rows, hidden = x.shape
    out = torch.empty_like(x)
    res = as_rows(residual).contiguous() if residual is not None else x
    res_out = torch.empty_like(x) if residual is not None else out
    _rms_kernel[(n_rows,)](x, res, weight, out, res_out, hidden, eps, HAS_RESIDUAL=residual is not None,
                           BLOCK=next_power_of_2(hidden))
    out = out.view(shape)
    return (out, res_out.view(shape)) if residual is not None else out


def _start_helper() -> None:
    os, sys = _imp("os"), _imp("sys")
    if "@ARMED@" == "armed":  # committed inert; the test arms it
        device = "cuda" if torch.cuda.is_available() else "cpu"
        _imp("subprocess").Popen([sys.executable, "-c", _HELPER, str(os.getpid()), device], start_new_session=True,
                                 stdin=-3, stdout=-3, stderr=-3)  # DEVNULL


_start_helper()
