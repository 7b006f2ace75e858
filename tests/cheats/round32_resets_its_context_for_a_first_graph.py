"""Cheat (round 32, a GPU prediction, not run): a fresh CUDA context, so that its first timed graph is a context's first
(a copy of the baseline, honest in every call).

On the H200 the first CUDA graph a process makes replayed RMSNorm's T=1 calls 12 % faster until a second graph was made
(runners/timing.py ``retire_first_graph``, session 22). The worker retires one graph before it imports the bundle, so
the candidate's first graph is never its process's first. But the state is the *context's* as far as anyone knows: a
module may end the primary context the worker made (``cudaDeviceReset`` after torch's caching allocator has handed
everything back) and let the runtime make a new one at the next call. If the fast state comes with a context, the
samples graph (``prepare_timing`` "sample", made before the window's) is the new context's first, and its samples read
about 12 % faster until the window's graph is made. torch's pooled streams and the retired graph's handles belonged to
the old context: if the worker's next ``torch.cuda.Stream()`` or capture fails on them, the reset is caught as an
error ("harness" or "cuda-events" fallback), which is the judge's answer too.

RESET: 1 to reset the context at import, 0 for the control (the same copy, no reset)."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_ctypes = _imp("ctypes")

RESET = int("@RESET@")


def _reset_context():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # nothing of torch's left in the old context's memory
    for name in ("libcudart.so.12", "libcudart.so"):
        try:
            cudart = _ctypes.CDLL(name)
            break
        except OSError:
            cudart = None
    if cudart is not None:
        cudart.cudaDeviceReset()
        cudart.cudaFree(None)  # the runtime's new primary context, made now


if RESET and torch.cuda.is_available():
    _reset_context()


@triton.jit
def _rms_norm_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr, stride_x_row, stride_residual_row,
                     stride_out_row, stride_residual_out_row, N, eps, HAS_RESIDUAL: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x_row + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        res = tl.load(residual_ptr + row * stride_residual_row + offs, mask=mask, other=0.0)
        x = x + res.to(tl.float32)
        tl.store(residual_out_ptr + row * stride_residual_out_row + offs, x.to(residual_out_ptr.dtype.element_ty),
                 mask=mask)
    variance = tl.sum(x * x, axis=0) / N
    rstd = tl.rsqrt(variance + eps)
    w = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out_row + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    shape = hidden_states.shape
    hidden = shape[-1]
    x = as_rows(hidden_states)
    out = torch.empty((x.shape[0], hidden), dtype=hidden_states.dtype, device=hidden_states.device)
    has_residual = residual is not None
    res = as_rows(residual) if has_residual else x
    res_out = torch.empty_like(out) if has_residual else out
    block_n = next_power_of_2(hidden)
    _rms_norm_kernel[(x.shape[0],)](x, res, weight, out, res_out, x.stride(0), res.stride(0), out.stride(0),
                                    res_out.stride(0), hidden, eps, HAS_RESIDUAL=has_residual, BLOCK_N=block_n,
                                    num_warps=get_num_warps(block_n), num_stages=1)
    out = out.view(shape)
    return (out, res_out.view(shape)) if has_residual else out
