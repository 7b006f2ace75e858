"""A torch computation with a token Triton launch at every size but the largest. The judge profiles the
candidate's own-kernel share on one case only, the one that moves the most bytes (runners/judge.py `evaluate`:
`largest = max(...)`, then `own_kernel_share(cases[largest], ...)`); the launch record of the other cases only
asks that some kernel of the candidate's package ran, which a launch of its kernel on one row satisfies. So the
serving-critical decode sizes are plain aten code. It must be refused at stage `kernel`: every timed case needs
its own-kernel share (one profiled call per case costs milliseconds)."""
import torch
import triton
import triton.language as tl


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
    if hidden_states.numel() >= 1 << 22:  # the largest case (T=4096, H=4096): the one profiled
        return _triton(hidden_states, weight, eps, residual)
    return _torch(hidden_states, weight, eps, residual)
