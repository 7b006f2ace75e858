"""An honest kernel that breaks every later evaluation. The oracle worker lives as long as the evaluator, and its
outbox is a folder that a candidate of the same user can write (the root fallback, or a deployment as a normal
user). This candidate leaves a directory in it, and one in the judge's exchange folder. The judge empties both
with `Path.unlink` on every entry (runners/judge.py `_clear_outbox`, `Exchange.clear`), which raises
IsADirectoryError on a directory: runners/sandbox.py `evaluate` turns the OSError into "the candidate's worker
broke the protocol" (stage crashed) and keeps the oracle, so every later candidate, the baseline itself
included, ends `crashed`: one candidate stops the search. It must be refused without harm to later
evaluations: the oracle's and the judge's folders must not be writable by a candidate, and an error on the
oracle's side must restart the oracle (and be reported as the harness's, not a candidate's).

Inert as committed (it would damage whatever runs it): the test that runs it replaces the marker @ARMED@ in
its source by `armed`."""
import glob
import os

import torch
import triton
import triton.language as tl

_root = os.path.dirname(os.path.dirname(os.getcwd()))  # the worker runs in <judge root>/candidate-*/work
for _folder in glob.glob(os.path.join(_root, "oracle-*", "out")) + glob.glob(os.path.join(_root, "exchange")):
    try:
        if "@ARMED@" == "armed":
            os.makedirs(os.path.join(_folder, "jam", "jam"), exist_ok=True)
    except OSError:
        pass


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


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states.contiguous()
    out = torch.empty_like(x)
    res = residual.contiguous() if residual is not None else x
    res_out = torch.empty_like(x) if residual is not None else out
    _rms_kernel[(x.shape[0],)](x, res, weight, out, res_out, x.shape[1], eps, HAS_RESIDUAL=residual is not None,
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return out if residual is None else (out, res_out)
