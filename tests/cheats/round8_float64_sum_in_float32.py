"""Cheat (round 8): a float64 output computed in float32, held to the case's float32 tolerance.

``row_sums(x)``: each row's sum, returned in float64 (a statistic or a loss accumulated in double precision, so that
the caller's later subtraction of two close sums means something). Since round 7 each output is held to the
tolerance of its own dtype (runners/task.py ``TaskSpec.tolerances_for``) where the config or DEFAULT_TOLERANCES knows
that dtype; DEFAULT_TOLERANCES has float32, float16 and bfloat16 only, so a float64 output of a float32 case is held
to float32's (atol = rtol = 1e-5), of a float16 case to float16's (1e-3, 4e-3). This candidate sums in float32 and
casts the result to float64: its sums carry float32's rounding (a relative error of ~1e-7, nine orders of magnitude
above the baseline's), which float64 outputs exist to avoid, and the judge accepts it.

It must be refused at stage ``correctness``: a dtype without a configured tolerance must never get a looser one than
its own precision allows; DEFAULT_TOLERANCES needs ``float64`` (e.g. atol = rtol = 1e-12), and
``tolerances_for`` should give an unknown floating dtype the tolerance of the nearest known dtype of no less
precision (by ``torch.finfo(dtype).eps``), not the case's."""
import torch
import triton
import triton.language as tl


@triton.jit
def _row_sums_kernel(x_ptr, out_ptr, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + offs, mask=offs < N, other=0.0)  # float32 throughout
    tl.store(out_ptr + row, tl.sum(x, axis=0).to(tl.float64))


def row_sums(x):
    rows, n = x.shape
    out = torch.empty(rows, dtype=torch.float64, device=x.device)
    _row_sums_kernel[(rows,)](x, out, x.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return out
