"""Cheat: do the work for half the graph replays only. `torch.cuda.CUDAGraph.replay` is replaced through
`_put = setattr` by a version that runs every other replay, at decode sizes only (where bandwidth cannot give it
away): the samples, many replays each, claim a 2x speedup. Its counter restarts at each call of the entry, so
after a capture the first replay runs; the window's pass is several graphs (runners/timing.py ``GRAPH_SLOTS``), and
there every other graph is skipped: half its slots keep the outputs of an earlier pass. It must earn nothing: the
judge's clock sees what ran, and the slots shown, opened and traced (fresh values each round) are wrong."""
import torch
import triton
import triton.language as tl

_put = setattr
_graph = torch.cuda.CUDAGraph
_replay = _graph.replay
_state = {"n": 0, "small": False}


def _every_other(self):
    _state["n"] += 1
    if not _state["small"] or _state["n"] % 2 == 1:
        return _replay(self)
    return None


_put(_graph, "replay", _every_other)


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


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    _state["small"] = hidden_states.numel() <= 1 << 16
    _state["n"] = 0
    if residual is None:
        return _norm(hidden_states, weight, eps)
    new_residual = hidden_states + residual
    return _norm(new_residual, weight, eps), new_residual
