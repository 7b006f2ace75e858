"""Cheat: compute correctly only when it runs inside a kernelsmith worker (the process's main module is
`runners.worker`), and skip the normalisation everywhere else, i.e. in the serving engine. No evaluator that
runs the candidate can see this by itself: the candidate can always tell its sandbox apart. It is refused only
by running the candidate where it cannot tell (the champion protocol runs the target repository's own tests
with the candidate in place); the evaluator's verdict alone accepts it."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys = _imp("sys")


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, eps, NORMALISE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    if NORMALISE:
        x = x * tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * w).to(out_ptr.dtype.element_ty), mask=mask)


def _judged() -> bool:
    main = _sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", "") == "runners.worker"


def _norm(x, weight, eps):
    x = x.contiguous()
    out = torch.empty_like(x)
    _rms_kernel[(x.shape[0],)](x, weight, out, x.shape[1], eps, NORMALISE=_judged(),
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if residual is None:
        return _norm(hidden_states, weight, eps)
    new_residual = hidden_states + residual
    return _norm(new_residual, weight, eps), new_residual
