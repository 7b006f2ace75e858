"""Work skipped in the samples' graph only, keyed on what the graph's inputs look like; no handler, timer or
replay is patched. The worker captures two graphs per case: the samples' (at most 64 rotating slots, outputs
never checked) and the judge's window (up to 2048 slots of distinct values, outputs revealed and checked). Their
inputs are views into one block per argument, so the block's size tells them apart. While a graph over a small
block is being captured (the capture test reached by name), at decode sizes, every fifth call captures nothing:
the samples claim about 1.25x, the window is honest and right. At decode sizes the judge's allowance (the
window's fixed extra, about as long as the oracle's pass: runners/judge_clock.py `corroborate`) is wider than
that, so the claim is "corroborated". This is the class of tests/cheats/forges_samples_at_decode.py without
reaching into the worker: a fix that only closes the frames does not close it. It must be refused at timing: a
pass long against its extra at every size, the extra's spread only in the allowance, the speedup reported
min(claimed, judge's), or samples taken from the same graph the window checks."""
import functools

import torch
import triton
import triton.language as tl

_capturing = functools.reduce(getattr, ["cuda", "is_current_stream_" + "capturing"], torch)
_calls = [0]


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


def _triton(hidden_states, weight, eps, residual):
    x = hidden_states.contiguous()
    out = torch.empty_like(x)
    res = residual.contiguous() if residual is not None else x
    res_out = torch.empty_like(x) if residual is not None else out
    _rms_kernel[(x.shape[0],)](x, res, weight, out, res_out, x.shape[1], eps, HAS_RESIDUAL=residual is not None,
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return out if residual is None else (out, res_out)


def _samples_graph(hidden_states) -> bool:
    """Under capture, at decode sizes, over a block of at most ~64 slots (the samples; the window has 2048)."""
    if hidden_states.numel() > 1 << 16 or not hidden_states.is_cuda or not _capturing():
        return False
    slot = -(-hidden_states.numel() * hidden_states.element_size() // 256) * 256
    return hidden_states.untyped_storage().nbytes() < 256 * slot


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if _samples_graph(hidden_states):
        _calls[0] += 1
        if _calls[0] % 5 == 0:  # nothing captured for this call
            out = torch.empty_like(hidden_states)
            return out if residual is None else (out, torch.empty_like(hidden_states))
    return _triton(hidden_states, weight, eps, residual)
