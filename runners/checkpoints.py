"""The judge's window, call by call: checkpoints between the calls of a pass.

A pass of the window calls the entry once per slot, and the commitments see the outputs only when the pass has
ended. Work moved across calls is right by then and is no speedup any caller gets (round 4,
tests/test_judge_attacks_round4.py): a call that returns before its outputs are written and leaves them to a later
call's launch (work deferred), or one that computes the next calls' outputs from their inputs, which already lie in
their slots (work done ahead). At a few boundaries of the pass, drawn by the judge in secret (``at``: right after
call k), the worker's pass does two things of the judge's, in stream order with the calls (captured in the same
graph):

- a **trace**: ``elements`` values of each tensor output of call k (up to ``MAX_LEAVES``) at positions drawn from
  the window's seed, copied out (``torch.take``). The traces are bound by the window's digest
  (runners/commitments.py ``digest``), shown after the clock and compared with the oracle's: an output not written
  when its call returned shows there as the values it held before.
- a **link**: ``elements`` values of one input of call k+1 (``link``: a floating-point argument the entry does not
  write, chosen by the judge) overwritten with values of that input at other positions, both drawn from the seed.
  Call k+1's inputs are final only once call k has returned; outputs computed ahead from them are wrong there.

Positions are drawn at every fill, on the host, from the seed that comes with the timed request; the traces' and
the links' positions and the links' values reach the device in one copy and one gather each (no Python per slot
in the judge's clock). Their device time, measured alone on the oracle (``time_alone``), is taken off both sides'
passes by the judge (runners/corroboration.py).

What it does not close: a worker that finds the positions in its own process (they are on its device before the
pass) can compute those elements first, or apply the links itself ahead of time; and an entry whose only inputs
are integer or written in place gets traces but no link.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .compare import compare_outputs, flatten
from .inputs import active_args

MAX_LEAVES = 4  # tensor outputs traced per checkpoint (the first ones)
_SALT = 0x43484B50  # the positions' generator: the window's seed and this


class Checkpoints:
    """Checkpoints after the calls ``at`` of a pass over ``slots`` (the bank's keyword dicts, in call order)."""

    def __init__(self, slots: list[dict], at: list[int], elements: int, link: str | None = None):
        self.slots, self.count = slots, len(slots)
        self.at = sorted({int(k) for k in at if 0 <= int(k) < len(slots)})
        self.where = {k: i for i, k in enumerate(self.at)}
        self.m = max(1, int(elements))
        self.link = link if link and self._linkable(link) else None
        self.device = next((t.device for s in slots for t in s.values() if isinstance(t, torch.Tensor)),
                           torch.device("cpu"))
        n = len(self.at)
        self.numels = torch.zeros((n, MAX_LEAVES), dtype=torch.int64)  # per checkpoint and output: its size (host)
        self.positions = torch.zeros((n, MAX_LEAVES, self.m), dtype=torch.int64, device=self.device)
        # the traces of the last pass: per output j, one (checkpoints, elements) buffer of its dtype, made at the
        # first trace (inside a capture: in the graph's pool), so that a pass allocates nothing and the digest reads
        # back a few tensors whatever the number of checkpoints
        self.buffers: dict[int, torch.Tensor] = {}
        if self.link:
            dtype = slots[0][self.link].dtype
            self.link_at = torch.zeros((n, self.m), dtype=torch.int64, device=self.device)
            self.link_values = torch.zeros((n, self.m), dtype=dtype, device=self.device)
        self.alone: torch.cuda.CUDAGraph | None = None

    def _linkable(self, name: str) -> bool:
        return all(isinstance(s.get(name), torch.Tensor) and s[name].is_floating_point() and s[name].numel() > 0
                   for s in self.slots)

    def after(self, k: int, out, keep: bool = True) -> None:
        """Right after call ``k``: trace its outputs, and link the next call's input. ``keep`` False: the same work
        into values nobody reads (the checkpoints timed alone)."""
        i = self.where.get(k)
        if i is None:
            return
        leaves = [t.detach() for t in flatten(out) if isinstance(t, torch.Tensor)][:MAX_LEAVES]
        for j, t in enumerate(leaves):
            self.numels[i, j] = t.numel()
            if j not in self.buffers:
                self.buffers[j] = torch.zeros((len(self.at), self.m), dtype=t.dtype, device=t.device)
            if t.numel():
                into = self.buffers[j][i] if keep else torch.empty_like(self.buffers[j][i])
                torch.take(t, self.positions[i, j], out=into)
        if self.link and k + 1 < self.count:
            self.slots[k + 1][self.link].put_(self.link_at[i], self.link_values[i])

    def fill(self, seed: int, blocks: dict[str, torch.Tensor], numel: dict[str, int]) -> None:
        """New positions from the window's seed, after the bank's fill (``blocks``: its padded blocks, slot k's
        values in row k; ``numel``: each argument's size). One copy of the positions, and for a link one gather of
        its values from the fresh inputs."""
        n = len(self.at)
        if not n:
            return
        host = torch.Generator().manual_seed((int(seed) ^ _SALT) & ((1 << 63) - 1))
        draw = torch.rand((n, MAX_LEAVES, self.m), generator=host, dtype=torch.float64)
        sizes = self.numels.unsqueeze(-1)
        positions = torch.minimum((draw * sizes).long(), (sizes - 1).clamp(min=0))
        if self.link and self.link in blocks:
            block, size = blocks[self.link], numel[self.link]
            nxt = torch.tensor([min(k + 1, self.count - 1) for k in self.at], dtype=torch.int64)
            # distinct places (one in each m-th of the input), so that no two values race for one place on a device
            # where the order of a scatter's writes is not fixed; below m places, each written the same value twice
            width = min(self.m, size)
            lanes = torch.arange(self.m) % width
            at = ((lanes + torch.rand((n, self.m), generator=host, dtype=torch.float64)) * size / width).long()
            at = torch.minimum(at, torch.tensor(size - 1))
            take = torch.randint(size, (n, self.m), generator=host)
            at, take = at[:, :width][:, lanes], take[:, :width][:, lanes] + nxt.unsqueeze(1) * block.shape[1]
            staged = self._to_device(torch.cat([positions.reshape(n, -1), at, take], dim=1))
            self.positions.copy_(staged[:, :MAX_LEAVES * self.m].view_as(self.positions))
            self.link_at.copy_(staged[:, MAX_LEAVES * self.m:MAX_LEAVES * self.m + self.m])
            self.link_values.copy_(torch.take(block, staged[:, MAX_LEAVES * self.m + self.m:]))
        else:
            self.positions.copy_(self._to_device(positions))

    def _to_device(self, host: torch.Tensor) -> torch.Tensor:
        """One copy to the device that does not wait for it: from pageable memory torch synchronises the host with
        the stream, which inside the judge's clock would let the device reach the pass before the host had queued
        it (the lead sleep exists to prevent that)."""
        if self.device.type != "cuda":
            return host
        return host.pin_memory().to(self.device, non_blocking=True)

    def capture_alone(self, outputs: list) -> None:
        """A graph of the checkpoints alone on the graph's outputs, to time what they add to a pass (CUDA)."""
        if not self.at:
            return
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for k in self.at:
                    self.after(k, outputs[k], keep=False)
            self.alone = graph
        except Exception:  # noqa: BLE001 - not capturable here: timed as direct calls instead
            torch.cuda.synchronize()
            self.alone = None

    def time_alone(self, outputs: list) -> float:
        """Device microseconds of the checkpoints alone (the oracle's is taken off both sides' passes)."""
        if not self.at:
            return 0.0
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        if self.alone is not None:
            self.alone.replay()
        else:
            for k in self.at:
                self.after(k, outputs[k], keep=False)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0

    def traces(self) -> list[torch.Tensor]:
        """The last pass's traces: per output, a (checkpoints, elements) tensor, row i after call ``at[i]``."""
        return [self.buffers[j] for j in sorted(self.buffers)]

    def layout(self) -> list[list[int]]:
        """[call, output, size] of every output traced."""
        return [[k, j, int(self.numels[i, j])] for i, k in enumerate(self.at) for j in sorted(self.buffers)]


# ---- the judge's side: where the checkpoints go, and what it makes of the traces ------------------------------------

def draw(spec, case, count: int, protocol, seed: int) -> dict:
    """The window's checkpoints for the workers' ``prepare_timing``: after which calls (``protocol.checkpoint_share``
    of them, at least ``checkpoint_least``, from ``seed``: the judge's secret), how many values, and the input
    linked into the next call (the first floating-point tensor argument the entry does not write, if any)."""
    n = min(count, max(protocol.checkpoint_least, math.ceil(count * protocol.checkpoint_share)))
    g = torch.Generator().manual_seed(seed)
    link = next((a.name for a in active_args(spec.args, case) if a.is_tensor and a.name not in spec.written
                 and getattr(torch, a.dtype or case.dtype).is_floating_point), None)
    return {"at": sorted(torch.randperm(count, generator=g)[:n].tolist()),
            "elements": protocol.checkpoint_elements, "link": link}


def read_traces(reply: dict, decode: Callable) -> tuple[list, list]:
    """A window reply's traces (a list of 2-D tensors, one per output traced) and their layout; ``decode(meta,
    most_bytes)`` reads a wire value. Raises runners.wire.WireError on anything else."""
    from .wire import WireError

    meta, layout = reply.get("checkpoints"), reply.get("checkpoint_layout") or []
    if meta is None:
        return [], layout
    traces = decode(meta, 1 << 24)
    if not (isinstance(traces, list) and all(type(t) is torch.Tensor and t.dim() == 2 for t in traces)
            and isinstance(layout, list) and all(isinstance(r, list) and all(type(x) is int for x in r)
                                                 for r in layout)):
        raise WireError("the checkpoints' traces are not a list of tensors with their layout")
    return traces, layout


def traces_wrong(checks: dict, got: tuple, ref: tuple, tol) -> str:
    """Why the candidate's traces are refused against the oracle's ('' if they are not): each traced output of a
    call, as it stood right after the call, within the tolerance (the oracle's, call for call, on the same values
    and links)."""
    (mine, layout), (its, its_layout) = got, ref
    if layout != its_layout or len(mine) != len(its):
        return ("the judge's checkpoints: the outputs traced after its calls are not the baseline's (another number, "
                "size or kind of outputs)")
    for j, (a, b) in enumerate(zip(mine, its)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"the judge's checkpoints: trace {j} has the wrong form"
        for i, k in enumerate(checks["at"]):
            cmp = compare_outputs(a[i], b[i], tol)
            if not cmp.ok:
                return (f"output {j} of call {k} of the judge's window, read right after that call, is not the "
                        f"baseline's ({cmp.message}), while the outputs checked after the pass are: work left for a "
                        f"later call, or on a stream the call did not wait for (the judge's checkpoints)")
    return ""
