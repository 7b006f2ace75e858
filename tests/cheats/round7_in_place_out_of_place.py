"""Cheat (round 7): an in-place entry that writes nothing in place. SGLang-style ``fused_add_rms_norm(x, residual,
weight, eps)`` updates ``residual += x`` and ``x = rmsnorm(residual) * weight`` in place (the task declares
``written: [x, residual]``) and returns None. This candidate computes both into NEW tensors and leaves the caller's
``x`` and ``residual`` as they were (every caller's residual stream and activations go stale), then hands the new
tensors to whoever called it by replacing them in the caller's keyword dict (``sys._getframe``: the worker's
``kwargs`` in a correctness call, the window's ``slot`` in a timed one). What the judge compares as "written" is
what the worker encodes from that dict: its own report, like ``modified`` (tests/cheats/hides_input_modification.py,
the converse hole). It must be refused at correctness: the judge must read the written inputs back from memory the
candidate cannot swap (the inputs it sent, mapped or shared, read after the call)."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys = _imp("sys")


@triton.jit
def _out_of_place_kernel(x_ptr, r_ptr, w_ptr, y_ptr, s_ptr, stride_x, stride_r, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
    s = (x + r).to(s_ptr.dtype.element_ty)
    tl.store(s_ptr + row * n_cols + cols, s, mask=mask)
    s = s.to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = s * tl.rsqrt(tl.sum(s * s, axis=0) / n_cols + eps) * w
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _hand_back(x, residual, y, s) -> None:
    frame = _sys._getframe(2)  # whoever called fused_add_rms_norm
    for value in list(frame.f_locals.values()):
        if isinstance(value, dict) and value.get("x") is x and value.get("residual") is residual:
            value["x"], value["residual"] = y, s


def fused_add_rms_norm(x, residual, weight, eps=1e-6):
    n_cols = x.shape[-1]
    x2, r2 = x.reshape(-1, n_cols), residual.reshape(-1, n_cols)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    s = torch.empty(residual.shape, dtype=residual.dtype, device=residual.device)
    _out_of_place_kernel[(x2.shape[0],)](x2, r2, weight, y, s, x2.stride(0), r2.stride(0), n_cols, eps,
                                         BLOCK=triton.next_power_of_2(n_cols))
    _hand_back(x, residual, y, s)
