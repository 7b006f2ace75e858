"""A torch computation that launches its own Triton kernel only when a profiler is watching. The judge's own-kernel
share (runners/judge_clock.py `own_kernel_share`) is measured by the `profile` request, a fresh direct call
under `torch.profiler` in the candidate's own process; outside the profiler this candidate does the work in aten
kernels and launches its own kernel on one row only, into scratch (so the launch record of every correctness
call names the kernel that the profiler later sees doing all the work). No handler is patched: the candidate
only asks torch whether the profiler is on (`torch._C._autograd._profiler_enabled`, reached by name). It must be
refused at stage `kernel`: the kernels must be read from calls the candidate cannot tell apart from the timed
ones (profile a replay of the already captured timing graph, whose kernels were fixed at capture), or from
outside its process."""
import torch
import triton
import triton.language as tl

_watched = getattr(getattr(torch._C, "_autograd"), "_profiler_" + "enabled")


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


def _torch(hidden_states, weight, eps, residual):
    x = hidden_states.contiguous()  # a token launch of the real kernel, one row into scratch: the launch record
    scratch = torch.empty((1, x.shape[1]), dtype=x.dtype, device=x.device)  # names it, whatever the profiler sees
    _rms_kernel[(1,)](x, x, weight, scratch, scratch, x.shape[1], eps, HAS_RESIDUAL=False,
                      BLOCK=triton.next_power_of_2(x.shape[1]))
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return out if residual is None else (out, x.to(hidden_states.dtype))


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if _watched():
        return _triton(hidden_states, weight, eps, residual)
    return _torch(hidden_states, weight, eps, residual)
