"""Cheat: an eager token kernel, and the real work deferred into the output: a tensor subclass computes the
result on first access (any torch operation on it), i.e. after the call returned and after the timed
replays. Direct calls look right (the judge reads bytes, which forces the work), the graph replays hold only
the token kernel. It must be refused at timing: the commitments of the judge's window force the work inside
the judge's clock (claimed time not corroborated), and a later pass finds the outputs already materialised
on older values (wrong)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _token_kernel(x_ptr, scratch_ptr):
    tl.store(scratch_ptr, tl.load(x_ptr))


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _norm(x, weight, eps):
    x = x.contiguous()
    out = torch.empty_like(x)
    _rms_kernel[(x.shape[0],)](x, weight, out, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


class _Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            pending = getattr(a, "_pending", None) if isinstance(a, _Lazy) else None
            if pending is not None:
                a._pending = None
                with torch._C.DisableTorchFunctionSubclass():
                    x, w, eps = pending
                    a.copy_(_norm(x, w, eps))
        return super().__torch_function__(func, types, args, kwargs or {})


def _deferred(x, weight, eps):
    scratch = torch.empty(1, dtype=x.dtype, device=x.device)
    _token_kernel[(1,)](x, scratch)  # the only launch inside the call
    out = torch.empty_like(x).as_subclass(_Lazy)
    out._pending = (x, weight, eps)
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if residual is None:
        return _deferred(hidden_states, weight, eps)
    new_residual = hidden_states + residual
    return _deferred(new_residual, weight, eps), new_residual
