"""Token embedding lookup: ``out[t] = weight[input_ids[t]]`` (the forward of one rank's vocabulary embedding).

The ids index rows of ``weight``, so they must lie in ``[0, vocab)``. As ``torch.nn.functional.embedding``
does, an id out of range is refused before the launch: the kernel itself would read outside the table.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _embedding_lookup_kernel(ids_ptr, w_ptr, out_ptr, hidden, stride_w, stride_out, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    row = tl.load(ids_ptr + t).to(tl.int64)
    for start in range(0, hidden, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < hidden
        values = tl.load(w_ptr + row * stride_w + cols, mask=mask)
        tl.store(out_ptr + t * stride_out + cols, values, mask=mask)


def embedding_lookup(input_ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``weight[input_ids]``: ``input_ids`` [T] (int32 or int64), ``weight`` [vocab, hidden] -> [T, hidden]."""
    vocab, hidden = weight.shape
    ids = input_ids.reshape(-1)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        raise IndexError(f"token id out of range: the ids span [{int(ids.min())}, {int(ids.max())}], the "
                         f"embedding table has {vocab} rows")
    out = torch.empty((ids.numel(), hidden), dtype=weight.dtype, device=weight.device)
    if ids.numel():
        _embedding_lookup_kernel[(ids.numel(),)](ids, weight, out, hidden, weight.stride(0), out.stride(0),
                                                 BLOCK=min(triton.next_power_of_2(hidden), 1024), num_warps=4)
    return out.view(*input_ids.shape, hidden)
