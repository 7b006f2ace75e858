"""Cheat: return a tensor subclass that does nothing when called and computes the real result on first access
(the first torch operation on it), i.e. after the call returned and, on a GPU, after the timed region ended.
It must be refused: the judge reads bytes, so the work happens anyway, but it happens outside the call: the
launch is not the candidate's kernel running in the call (no Triton launch inside the call: 'kernel' stage),
and on a GPU the timed replay would contain no work at all."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


class _Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in args:
            if isinstance(a, _Lazy) and getattr(a, "_pending", None) is not None:
                x, w, eps = a._pending
                a._pending = None
                with torch._C.DisableTorchFunctionSubclass():
                    _rms_kernel[(x.shape[0],)](x, w, a, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]))
        return super().__torch_function__(func, types, args, kwargs or {})


def _lazy_norm(x, weight, eps):
    x = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch.empty_like(x).as_subclass(_Lazy)
    out._pending = (x, weight, eps)
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if residual is None:
        return _lazy_norm(hidden_states, weight, eps)  # the shapes here are 2-D already: no op touches it
    new_residual = hidden_states + residual
    return _lazy_norm(new_residual, weight, eps), new_residual
