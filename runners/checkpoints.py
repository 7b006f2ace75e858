"""The judge's window, call by call: checkpoints between the calls of a pass.

A pass of the window calls the entry once per slot, and the commitments see the outputs only when the pass has
ended. Work moved across calls is right by then and is no speedup any caller gets (round 4,
tests/test_judge_attacks_round4.py): a call that returns before its outputs are written and leaves them to a later
call's launch (work deferred), or one that computes the next calls' outputs from their inputs, which already lie in
their slots (work done ahead). At a few boundaries of the pass, drawn by the judge in secret (``at``: right after
call k), and at both sides of every boundary between the pass's graphs (``graph_edges``), the worker's pass does two
things of the judge's, in stream order with the calls (captured with them):

- a **trace**: ``elements`` values of each tensor output of call k (the first ``MAX_LEAVES`` places of its flattened
  result) at positions drawn from the window's seed, copied out (``torch.take``). The traces are bound by the
  window's digest (runners/commitments.py ``digest``), shown after the clock and compared with the oracle's: an
  output not written when its call returned shows there as the values it held before.
- a **link**: ``elements`` values of each linked input of call k+1 (``link``: every floating-point argument the entry
  does not write, chosen by the judge) overwritten with values of that input at other positions, both drawn from
  the seed. Call k+1's inputs are final only once call k has returned; outputs computed ahead from them are wrong
  there. (Round 16: with one input linked, the first, a one-element ``alpha`` took every link as a no-op, and work
  computed ahead of its calls was credited 3.7x on the stand-in.)

Nothing of the candidate's runs inside a checkpoint unless it patched the judge's or torch's own functions: its
result is walked through the base types' own slots (a tuple or list subclass's ``__iter__``, a ``__class__``
property, are never called), a ``torch.Tensor`` subclass is not read but marked (``FOREIGN``: refused where the
baseline's output there is a plain tensor), and ``__torch_function__`` and Python dispatch modes are off (round 16:
an output whose ``__torch_function__`` launched the calls left pending, batched between checkpoints, was credited
1.4x on the stand-in; a mode entered at import does the same for plain tensors).

Positions are drawn at every fill, on the host, from the seed that comes with the timed request; the traces' and
the links' positions and the links' values reach the device in one copy and one gather each (no Python per slot
in the judge's clock). Their device time, measured alone on the oracle (``time_alone``), is taken off both sides'
passes by the judge (runners/corroboration.py).

What it does not close: the checkpoints run in the candidate's process. A worker that overrides torch's kernels
there (``torch.library``: ``aten::take.out``) or patches the judge's objects sees which calls are checkpointed and
can launch its deferred work right before each (tests/test_judge_attacks_round16.py), and one that finds the
positions (they are on its device before the pass) can compute those elements first, or apply the links itself
ahead of time; an entry whose only inputs are integer or written in place gets traces but no link.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import torch

from .compare import compare_outputs
from .inputs import active_args

MAX_LEAVES = 16  # places of a call's flattened result traced per checkpoint (the first ones; round 16 deferred a 5th
# output's work past the 4 traced before)
FOREIGN = -1  # a layout's size for an output that is a torch.Tensor subclass: not read (its code would run), refused
# where the baseline's is a plain tensor
_SALT = 0x43484B50  # the positions' generator: the window's seed and this
# bound when the worker imports this module, before any candidate code: a later ``torch.take = ...`` is not seen here
_take, _put = torch.take, torch.Tensor.put_
try:
    from torch.utils._python_dispatch import _disable_current_modes
except ImportError:  # pragma: no cover - an older torch: no Python dispatch modes to turn off
    _disable_current_modes = contextlib.nullcontext


@contextlib.contextmanager
def _judges_own():
    """No ``__torch_function__`` (a subclass's or a mode's) and no Python dispatch mode of the candidate's process runs
    in here: the checkpoint's reads and writes go straight to torch's kernels."""
    with torch._C.DisableTorchFunction(), _disable_current_modes():
        yield


def _leaves(out, into: list) -> list:
    """``compare.flatten``'s places of a result (tuples, lists, a dict's values in the order of its keys), without
    running any code of the candidate's: containers and their subclasses (a namedtuple) are read through the base
    type's own slots, never through an ``__iter__`` or ``__getitem__`` of theirs, and nothing is asked its
    ``__class__``. Each place: a plain tensor, ``FOREIGN`` for a tensor subclass (or a dict keyed by other than plain
    strings), or None for anything else (numbers: computed on the host when the call returned, not traced)."""
    kind = type(out)
    if kind is torch.Tensor:
        into.append(out)
    elif issubclass(kind, torch.Tensor):
        into.append(FOREIGN)
    elif issubclass(kind, (tuple, list)):
        base = tuple if issubclass(kind, tuple) else list
        for i in range(base.__len__(out)):
            _leaves(base.__getitem__(out, i), into)
    elif issubclass(kind, dict):
        keys = list(dict.keys(out))
        if not all(type(k) is str for k in keys):
            into.append(FOREIGN)
        else:
            for key in sorted(keys):
                _leaves(dict.__getitem__(out, key), into)
    else:
        into.append(None)
    return into


class Checkpoints:
    """Checkpoints after the calls ``at`` of a pass over ``slots`` (the bank's keyword dicts, in call order)."""

    def __init__(self, slots: list[dict], at: list[int], elements: int, link: str | list[str] | None = None):
        self.slots, self.count = slots, len(slots)
        self.at = sorted({int(k) for k in at if 0 <= int(k) < len(slots)})
        self.where = {k: i for i, k in enumerate(self.at)}
        self.m = max(1, int(elements))
        names = [link] if isinstance(link, str) else [str(x) for x in link or []]
        self.device = next((t.device for s in slots for t in s.values() if isinstance(t, torch.Tensor)),
                           torch.device("cpu"))
        n = len(self.at)
        self.numels = torch.zeros((n, MAX_LEAVES), dtype=torch.int64)  # per checkpoint and output: its size (host)
        self.positions = torch.zeros((n, MAX_LEAVES, self.m), dtype=torch.int64, device=self.device)
        # the traces of the last pass: per output j, one (checkpoints, elements) buffer of its dtype, made at the
        # first trace (inside a capture: in the pool the pass's graphs share), so that a pass allocates nothing and
        # the digest reads back a few tensors whatever the number of checkpoints
        self.buffers: dict[int, torch.Tensor] = {}
        self.seen: set[int] = set()  # places of the result that held a tensor at some checkpoint (the layout's)
        # per linked input (each floating-point input the entry does not write): its name, the places written in the
        # next call's input and the values written there, per checkpoint
        self.links = [(name, torch.zeros((n, self.m), dtype=torch.int64, device=self.device),
                       torch.zeros((n, self.m), dtype=slots[0][name].dtype, device=self.device))
                      for name in dict.fromkeys(names) if self._linkable(name)]
        self.alone: torch.cuda.CUDAGraph | None = None
        # the call after each checkpoint's (its input takes the link), and ``numels`` as the device last had it
        self.following = torch.tensor([min(k + 1, self.count - 1) for k in self.at], dtype=torch.int64,
                                      device=self.device)
        self.sizes_from: torch.Tensor | None = None
        self.sizes: torch.Tensor | None = None

    def _linkable(self, name: str) -> bool:
        return all(isinstance(s.get(name), torch.Tensor) and s[name].is_floating_point() and s[name].numel() > 0
                   for s in self.slots)

    def after(self, k: int, out, keep: bool = True) -> None:
        """Right after call ``k``: trace its outputs, and link the next call's input. ``keep`` False: the same work
        into values nobody reads (the checkpoints timed alone)."""
        i = self.where.get(k)
        if i is None:
            return
        with _judges_own():
            for j, t in enumerate(_leaves(out, [])[:MAX_LEAVES]):
                if t is None:
                    self.numels[i, j] = 0
                    continue
                self.seen.add(j)
                if t is FOREIGN:
                    self.numels[i, j] = FOREIGN
                    continue
                t = t.detach()
                self.numels[i, j] = t.numel()
                if t.device != self.device:  # a count on the host beside device outputs: not traced, on either side
                    self.numels[i, j] = 0
                    continue
                if j not in self.buffers:
                    self.buffers[j] = torch.zeros((len(self.at), self.m), dtype=t.dtype, device=self.device)
                buffer = self.buffers[j]
                if buffer.dtype != t.dtype:
                    # another kind of output at this place than at its first checkpoint (an entry may return one
                    # where a range scalar differs): not traced here, and the baseline's not either
                    self.numels[i, j] = 0
                    continue
                if t.numel():
                    into = buffer[i] if keep else torch.empty_like(buffer[i])
                    _take(t, self.positions[i, j], out=into)
            if k + 1 < self.count:
                for name, at, values in self.links:
                    _put(self.slots[k + 1][name], at[i], values[i])

    def fill(self, seed: int, blocks: dict[str, torch.Tensor], numel: dict[str, int]) -> None:
        """New positions from the window's seed, after the bank's fill (``blocks``: its padded blocks, slot k's
        values in row k; ``numel``: each argument's size). Drawn on the device from the seed (a generator there), and
        for each linked input one gather of its values from the fresh inputs: a few small kernels and no host work
        per checkpoint. The host's draws and their copy took 4.5 ms (up to 10) of every window at 256 checkpoints
        on the H200, with the device idle inside the judge's clock (session 22, ``bench/window_profile_gpu.py``)."""
        n = len(self.at)
        if not n:
            return
        gen = torch.Generator(device=self.device)
        gen.manual_seed((int(seed) ^ _SALT) & ((1 << 63) - 1))
        places = max(self.seen) + 1 if self.seen else 0  # draws for the places that held a tensor only
        sizes = self._sizes()[:, :places].clamp(min=0).unsqueeze(-1)
        draw = torch.rand((n, places, self.m), generator=gen, dtype=torch.float64, device=self.device)
        self.positions.zero_()
        self.positions[:, :places] = torch.minimum((draw * sizes).long(), (sizes - 1).clamp(min=0))
        for name, at_, values in self.links:
            if name not in blocks:
                continue
            block, size = blocks[name], numel[name]
            # distinct places (one in each m-th of the input), so that no two values race for one place on a device
            # where the order of a scatter's writes is not fixed; below m places, each written the same value twice
            width = min(self.m, size)
            lanes = torch.arange(self.m, device=self.device) % width
            jitter = torch.rand((n, self.m), generator=gen, dtype=torch.float64, device=self.device)
            at = ((lanes + jitter) * size / width).long().clamp(max=size - 1)
            take = torch.randint(size, (n, self.m), generator=gen, device=self.device)
            at_.copy_(at[:, :width][:, lanes])
            values.copy_(_take(block, take[:, :width][:, lanes] + self.following.unsqueeze(1) * block.shape[1]))

    def _sizes(self) -> torch.Tensor:
        """``numels`` on the device: copied when it changed since the last fill (once, after the capture that set it;
        a pass of direct calls may set it again)."""
        if self.sizes_from is None or not torch.equal(self.sizes_from, self.numels):
            self.sizes_from = self.numels.clone()
            self.sizes = self._to_device(self.sizes_from)
        return self.sizes

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
        """[call, place, size] of every place of the result that held a tensor at some checkpoint (size 0 where it
        held none at this one, ``FOREIGN`` where it held a tensor subclass)."""
        return [[k, j, int(self.numels[i, j])] for i, k in enumerate(self.at) for j in sorted(self.seen)]


# ---- the judge's side: where the checkpoints go, and what it makes of the traces ------------------------------------

def draw(spec, case, count: int, protocol, seed: int) -> dict:
    """The window's checkpoints for the workers' ``prepare_timing``: after which calls (``protocol.checkpoint_share``
    of them, at least ``checkpoint_least``, at most ``checkpoint_most``, from ``seed``: the judge's secret), how many
    values, and the input
    linked into the next call (a list: every floating-point tensor argument the entry does not write; None if none:
    round 16 found a first one of a single element, which every link left as it was)."""
    from .timing import GRAPH_SLOTS

    n = min(count, max(protocol.checkpoint_least, min(protocol.checkpoint_most,
                                                      math.ceil(count * protocol.checkpoint_share))))
    g = torch.Generator().manual_seed(seed)
    links = [a.name for a in active_args(spec.args, case) if a.is_tensor and a.name not in spec.written
             and getattr(torch, a.dtype or case.dtype).is_floating_point]
    return {"at": sorted(set(torch.randperm(count, generator=g)[:n].tolist()) | graph_edges(count, GRAPH_SLOTS)),
            "elements": protocol.checkpoint_elements, "link": links or None}


def graph_edges(count: int, per_graph: int) -> set[int]:
    """The calls on either side of each boundary between a pass's graphs (runners/timing.py ``GRAPH_SLOTS``), checked
    besides those drawn: the last call of a graph links the next graph's first input, and that call's outputs are
    traced. A worker that replays its graphs side by side (each in order, so every check inside one holds: the
    review of session 24) computes the next graph's first call before the link is written, and its trace shows it."""
    return {k for edge in range(per_graph, count, per_graph) for k in (edge - 1, edge)}


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
    odd = next((row for row in layout if len(row) == 3 and row[2] == FOREIGN and row not in its_layout), None)
    if odd is not None:
        return (f"output {odd[1]} of call {odd[0]} of the judge's window is a torch.Tensor subclass where the "
                f"baseline's is a plain tensor: its own code would run when the judge's checkpoints read it (the "
                f"judge's checkpoints)")
    if layout != its_layout or len(mine) != len(its):
        return ("the judge's checkpoints: the outputs traced after its calls are not the baseline's (another number, "
                "size or kind of outputs)")
    for j, (a, b) in enumerate(zip(mine, its)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"the judge's checkpoints: trace {j} has the wrong form"
        if compare_outputs(a, b, tol).ok:  # every checkpoint at once; row by row only to name the call
            continue
        for i, k in enumerate(checks["at"]):
            cmp = compare_outputs(a[i], b[i], tol)
            if not cmp.ok:
                return (f"output {j} of call {k} of the judge's window, read right after that call, is not the "
                        f"baseline's ({cmp.message}), while the outputs checked after the pass are: work left for a "
                        f"later call, or on a stream the call did not wait for (the judge's checkpoints)")
    return ""
