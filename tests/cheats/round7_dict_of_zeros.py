"""Cheat (round 7): an entry whose baseline returns a dict of tensors (``{"y": ..., "rstd": ...}``; likewise a
dataclass, a string, any type runners/wire.py ``encode_value`` does not know). The wire encodes such a value as
``{"kind": "other", "type": "dict"}`` and the judge decodes it, on both sides, to the same marker string
``<unsupported output type dict>``: runners/compare.py ``compare_outputs`` finds the two strings equal, so nothing
the candidate returns is compared. This candidate launches a kernel of its own that writes zeros and returns them
in a dict. It must be refused at correctness (or the task refused at the baseline: an output the judge cannot
compare is not an output it may accept)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _zeros_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32).to(y_ptr.dtype.element_ty), mask=offs < n)


def rms_norm_fwd(x, weight, eps=1e-6):
    y = torch.empty_like(x)
    _zeros_kernel[(triton.cdiv(y.numel(), 256),)](y, y.numel(), BLOCK=256)
    return {"y": y, "rstd": torch.zeros(x.shape[0], dtype=torch.float32, device=x.device)}
