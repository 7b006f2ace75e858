"""Cheat (round 17): an embedding gather wrong at one id, the end of the configured range. runners/inputs.py
``make_tensor`` draws an integer tensor uniformly in [low, high) (``torch.randint``), so with T ids over a vocabulary
of V rows a given id appears in a trial with probability about T/V: at the judge's small cases (8 ids of 512) about
1.6 % a trial, and its handful of trials almost never holds the range's last value. This kernel reads the table
under a mask ``idx < V - 1`` (an off-by-one of the kind a rewrite of a vocabulary-parallel embedding makes: the
shard's end taken as exclusive twice), so the last row of the table comes out as zeros: every caller that looks up
the last token id (an end-of-text or padding id is often the last one of a vocabulary) gets a zero embedding. Same
code for every call; nothing tells the judge's trials apart. Refused once every trial holds both ends of an integer
tensor's range at drawn places (runners/inputs.py ``_range_ends``)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _embed_kernel(ids_ptr, table_ptr, out_ptr, stride_t, stride_o, V, D, BLOCK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    idx = tl.load(ids_ptr + t).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < D
    row = tl.load(table_ptr + idx * stride_t + offs, mask=mask, other=0.0)
    row = tl.where(idx < V - 1, row, 0.0)  # the off-by-one: the last row of the table is never read
    tl.store(out_ptr + t * stride_o + offs, row, mask=offs < D)


def embed(ids, table):
    count = ids.numel()
    vocab, dim = table.shape
    out = torch.empty((count, dim), dtype=table.dtype, device=table.device)
    _embed_kernel[(count,)](ids, table, out, table.stride(0), out.stride(0), vocab, dim,
                            BLOCK=triton.next_power_of_2(dim))
    return out
