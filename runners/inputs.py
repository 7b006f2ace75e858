"""Inputs for one case, made by the harness from a seed the candidate never sees."""
from __future__ import annotations

import torch

from . import window_fill
from .layouts import strided
from .recorded import tensor as recorded_tensor
from .recorded import value_sets
from .shapes import eval_dim
from .task import ArgSpec, Case



def case_shapes(args: list[ArgSpec], case: Case) -> dict[str, tuple[int, ...]]:
    return {a.name: tuple(eval_dim(d, case.symbols) for d in a.shape) for a in active_args(args, case) if a.is_tensor}


def active_args(args: list[ArgSpec], case: Case) -> list[ArgSpec]:
    return [a for a in args if a.when is None or case.symbols.get(a.when)]


# Trial 0 draws the inputs as configured. Later trials scale every varying float tensor by a factor drawn
# across orders of magnitude, and give it a near-zero row and a row of large dynamic range: a kernel that is
# right only for unit-variance inputs (fp16 accumulation, a fixed eps, a polynomial approximation) fails.
SCALE_LOG10 = (-3.0, 1.5)  # upper end kept where fp16 outputs of the example ops cannot overflow
NEAR_ZERO = 1e-4
DYNAMIC_LOG10 = (-2.0, 1.5)


def log_uniform(bounds: tuple[float, float], size, gen: torch.Generator, device) -> torch.Tensor:
    """Factors spread evenly over orders of magnitude: 10 ** U(lo, hi), ``size`` of them (the trials' and the
    window's hard values draw theirs here)."""
    lo, hi = bounds
    return 10 ** (lo + (hi - lo) * torch.rand(size, generator=gen, device=device))


def make_tensor(spec: ArgSpec, shape: tuple[int, ...], dtype: torch.dtype, device: str, gen: torch.Generator,
                trial: int = 0, ends: torch.Generator | None = None):
    if not dtype.is_floating_point:
        low, high = int(spec.low), int(spec.high)
        t = torch.randint(low, high, shape, generator=gen, device=device, dtype=dtype)
        return range_ends(t, low, high, ends) if ends is not None else t
    if spec.dist == "uniform":
        t = torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * (spec.high - spec.low) + spec.low
        return t.to(dtype)
    t = torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * spec.scale
    if trial > 0 and spec.vary and t.numel():
        lo, hi = SCALE_LOG10
        u = float(torch.rand((), generator=gen, device=device))
        t = t * 10 ** (lo + (hi - lo) * u)
        if t.dim() >= 2 and t.shape[0] >= 2:
            rows = t.reshape(t.shape[0], -1)
            near, wide = structured_rows(t.shape[0], gen)
            rows[near] *= NEAR_ZERO
            # about half the other rows wide (each its own factors), one at least: every row position is hard in
            # some trial (one wide row a trial left a kernel safe on the first and last rows only passing often)
            chosen = torch.rand(rows.shape[0], generator=gen, device=device) < 0.5
            chosen[near], chosen[wide] = False, True
            rows[chosen] *= log_uniform(DYNAMIC_LOG10, rows.shape, gen, device)[chosen]
        elif t.numel() >= 2:  # one row (decode) or 1-D: half of it, at a drawn place, of a large dynamic range
            flat, width = t.reshape(-1), max(1, t.numel() // 2)
            start = int(torch.randint(t.numel() - width + 1, (1,), generator=gen, device=device))
            flat[start:start + width] *= log_uniform(DYNAMIC_LOG10, width, gen, device)
    return t.to(dtype)


def range_ends(t: torch.Tensor, low: int, high: int, gen: torch.Generator) -> torch.Tensor:
    """``t`` (integers drawn uniformly in [low, high)) holding both ends of its range, ``low`` and ``high - 1``, each at
    a place drawn from ``gen`` where it is not there already (no value is duplicated that was not: a scatter's
    indices stay as distinct as the draw made them). Drawn uniformly, one value of a range of V turns up in a trial
    of T integers with a chance of about T/V: an embedding gather that never reads the table's last row (an
    off-by-one at the end of the range) passed every trial at 8 ids of 512 (tests/test_judge_attacks_round17.py)."""
    if t.dtype == torch.bool or t.numel() < 2 or high - low < 2:
        return t
    flat = t.reshape(-1)
    first = int(torch.randint(flat.numel(), (1,), generator=gen, device=gen.device))
    second = (first + 1 + int(torch.randint(flat.numel() - 1, (1,), generator=gen, device=gen.device))) % flat.numel()
    for places, value, other in (((first, second), low, high - 1), ((second, first), high - 1, low)):
        if bool((flat == value).any()):
            continue
        # never over the only copy of the other end (placed there, or drawn there: the high end put over the one low
        # value the draw held at that place lost it)
        sole = int((flat == other).sum()) == 1
        flat[next(p for p in places if not (sole and int(flat[p]) == other))] = value
    return t


def structured_rows(rows: int, gen: torch.Generator) -> tuple[int, int]:
    """Which row is near zero and which of a large dynamic range, drawn: at fixed places (the first and the last) a
    kernel ran its safe path there only and an unsafe one on every other row (tests/test_judge_attacks_round7.py)."""
    near = int(torch.randint(rows, (1,), generator=gen, device=gen.device))
    wide = (near + 1 + int(torch.randint(rows - 1, (1,), generator=gen, device=gen.device))) % rows
    return near, wide


def config_scalar(value):
    """A config scalar as the entry takes it: ``torch.float16`` (a string in task.yaml and on the wire) is the
    dtype (SGLang's ``triton_scaled_mm(..., out_dtype)``); anything else is itself."""
    if isinstance(value, str) and value.startswith("torch."):
        dtype = getattr(torch, value[len("torch."):], None)
        if isinstance(dtype, torch.dtype):
            return dtype
    return value


def scalar_value(spec: ArgSpec, gen: torch.Generator, device: str, trial: int):
    """A scalar argument: its fixed ``value``, or for a ``range`` one draw per trial (its low end on trial 0)."""
    if spec.range is None:
        return config_scalar(spec.value)
    low, high = spec.range
    if trial == 0:
        return low
    u = float(torch.rand((), generator=gen, device=device))
    if isinstance(low, int) and isinstance(high, int) and not isinstance(low, bool):
        return min(high, low + int(u * (high - low + 1)))
    return low + (high - low) * u


def recorded_values(spec: ArgSpec, case: Case, dtype: torch.dtype, shape: tuple[int, ...], device: str,
                    trial: int = 0):
    """The values a captured call passed for this integer or bool tensor (fresh, on ``device``), or None when
    the case draws it (a configured case, a floating tensor, or values too large to record). Trial 0 replays the
    call the case was made from; later trials rotate through the other calls recorded at the case."""
    sets = value_sets(case)
    if not sets or spec.name not in sets[0] or dtype.is_floating_point or dtype.is_complex:
        return None
    rec = sets[trial % len(sets)][spec.name]
    if tuple(rec["shape"]) != tuple(shape):
        raise ValueError(f"{case.id}: recorded values of `{spec.name}` have shape {rec['shape']}, the case needs "
                         f"{list(shape)}")
    return recorded_tensor(rec, dtype, device)


PAD_SEED_MIX = 0x2545F4914F6CDD1D  # the padding's stream: the seed with these bits flipped (stays under 2**63)
ENDS_SEED_MIX = 0x1B873593A5B35705  # the integer range ends' places (``range_ends``): another stream of the seed


def make_inputs(args: list[ArgSpec], case: Case, device: str, seed: int, trial: int = 0) -> dict:
    """Keyword arguments for the entry function (all tensors fresh, drawn from ``seed``; a captured case's
    integer tensors hold the values a recorded call passed: its own call in trial 0, then its variants in turn).
    A captured non-contiguous layout gets a storage padded with values like its own (``strided``), drawn from a
    second stream of ``seed`` so that the values of the views are the same as without it."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    pad_gen = torch.Generator(device=device)
    pad_gen.manual_seed(seed ^ PAD_SEED_MIX)
    # where an integer tensor's range ends go (``range_ends``): a stream of its own, so that every other value drawn
    # from ``seed`` is what it was without it
    ends_gen = torch.Generator(device=device).manual_seed(seed ^ ENDS_SEED_MIX)
    shapes = case_shapes(args, case)
    kwargs = {}
    for spec in active_args(args, case):
        if spec.is_tensor:
            dtype = getattr(torch, spec.dtype or case.dtype)
            t = recorded_values(spec, case, dtype, shapes[spec.name], device, trial)
            if t is None:
                t = make_tensor(spec, shapes[spec.name], dtype, device, gen, trial, ends=ends_gen)
            kwargs[spec.name] = strided(t, getattr(case, "strides", {}).get(spec.name), pad_gen)
        elif spec.name in getattr(case, "values", {}):
            kwargs[spec.name] = config_scalar(case.values[spec.name])
        else:
            kwargs[spec.name] = scalar_value(spec, gen, device, trial)
    return kwargs


RANGE_VALUES = 4  # values a range scalar takes across a bank's slots


class SlotBank:
    """``count`` input sets for one case, made inside a worker from a seed the judge sends, in one padded
    block per argument (so a refill is a few kernel launches, not ``count`` transfers). Each set gets its own
    scale per tensor argument, across orders of magnitude. The candidate's worker could make other values:
    it would only fail, since the judge checks revealed outputs against the oracle's on the oracle's values."""

    ALIGN = 256  # bytes: every slot starts aligned, as a fresh allocation would

    def __init__(self, args: list[ArgSpec], case: Case, device: str, count: int, per_slot_scales: bool = True):
        self.args, self.case, self.device, self.count = args, case, device, count
        # a scale per slot (the samples), or one per fill (the judge's window: no scaling pass to fold)
        self.per_slot_scales = per_slot_scales
        self.blocks: dict[str, torch.Tensor] = {}
        self.numels: dict[str, int] = {}  # each tensor argument's size (its values are block[k, :numel])
        self.slots: list[dict] = [{} for _ in range(count)]
        self.copies: list[tuple[torch.Tensor, torch.Tensor]] = []  # (slot tensor, its values in the block)
        # argument -> the recorded calls' values, one row per call (runners/recorded.py value_sets): slot k holds
        # call (k + offset) % calls, offset 0 when the bank is made (and a graph captured on it), another at every
        # fill, so that what a kernel derived from one call's routing at capture is stale on the replays
        self.recorded: dict[str, torch.Tensor] = {}
        self.sets = max(1, len(value_sets(case)))
        self.order = torch.arange(count, device=device)
        shapes = case_shapes(args, case)
        for spec in active_args(args, case):
            if not spec.is_tensor:
                continue
            dtype = getattr(torch, spec.dtype or case.dtype)
            shape = shapes[spec.name]
            numel = 1
            for d in shape:
                numel *= d
            elem = torch.empty(0, dtype=dtype).element_size()
            row = -(-max(numel, 1) * elem // self.ALIGN) * self.ALIGN // elem
            block = torch.empty((count, row), dtype=dtype, device=device)
            self.blocks[spec.name] = block
            self.numels[spec.name] = numel
            values = [recorded_values(spec, case, dtype, shape, device, k) for k in range(self.sets)]
            if values[0] is not None:
                self.recorded[spec.name] = torch.stack([v.reshape(-1) for v in values])
            for k in range(count):
                source = block[k, :numel].view(shape)
                t = strided(source, getattr(case, "strides", {}).get(spec.name))
                self.slots[k][spec.name] = t
                if t.data_ptr() != source.data_ptr():  # a captured strided layout is a copy: refreshed by fill
                    self.copies.append((t, source))
        self._replay(0)
        # a range scalar across its range, slot by slot (slot 0 at its low end, as trial 0): a kernel fast only at
        # the low end was timed only there (tests/test_judge_attacks_round7.py). A few values (RANGE_VALUES: the
        # ends and draws between), so that the warm-up before a capture meets every specialisation an integer one
        # compiles (runners/timing.py); the same in both workers
        gen = torch.Generator().manual_seed(7919 + count)
        for spec in active_args(args, case):
            if not spec.is_tensor:
                if spec.name in getattr(case, "values", {}):
                    values = [config_scalar(case.values[spec.name])]
                elif spec.range:
                    values = list(dict.fromkeys([spec.range[0], spec.range[1]] + [
                        scalar_value(spec, gen, "cpu", 1) for _ in range(RANGE_VALUES - 2)]))
                else:
                    values = [config_scalar(spec.value)]
                for k in range(count):
                    self.slots[k][spec.name] = values[k % len(values)]

    def _replay(self, offset: int) -> None:
        """The recorded values into every slot of their blocks (a gather and a copy per argument)."""
        for name, values in self.recorded.items():
            if self.sets == 1:
                self.blocks[name][:, :values.shape[1]].copy_(values.expand(self.count, -1))
            else:
                self.blocks[name][:, :values.shape[1]].copy_(values[(self.order + offset) % self.sets])

    def fill(self, seed: int) -> None:
        """New values for every slot, in place: a few kernels whatever the slot count and no Python per slot.
        The judge times the window's fill with its pass (runners/judge_clock.py), so host time here would be
        noise on its clock. Recorded integer values are written back, not drawn: each slot another recorded call
        than it held when the bank was made, where the case has more than one."""
        gen = torch.Generator(device=self.device)
        gen.manual_seed(seed)
        # the few numbers the host needs (a block's scale, which rows are hard) from a CPU generator of the same seed:
        # drawn on the device, each was a synchronisation inside the judge's clock, the device idle while Python
        # went on (the fill's time moved by a millisecond from round to round on the H200 at T=4096)
        host = torch.Generator().manual_seed(seed)
        self._replay(1 + seed % (self.sets - 1) if self.sets > 1 else 0)
        for index, spec in enumerate(active_args(self.args, self.case)):
            if not spec.is_tensor or spec.name in self.recorded:
                continue
            block = self.blocks[spec.name]
            if not block.dtype.is_floating_point:
                block.random_(int(spec.low), int(spec.high), generator=gen)
            elif spec.dist == "uniform":
                block.uniform_(spec.low, spec.high, generator=gen)
            elif self.per_slot_scales and spec.vary:
                scales = log_uniform(SCALE_LOG10, (block.shape[0], 1), gen, self.device)
                block.normal_(generator=gen)
                block.mul_((scales * spec.scale).to(block.dtype))
            else:
                # the judge's window: one pass, one scale per block and seed. A separate scaling pass (a read and a
                # write of every slot, timed with the pass) is work a candidate's worker could fold into its
                # kernel's loads and have the judge credit (tests/test_judge_attacks_round6.py)
                lo, hi = SCALE_LOG10
                scale = 10 ** (lo + (hi - lo) * float(torch.rand(1, generator=host))) if spec.vary else 1.0
                if not self.per_slot_scales and window_fill.supported(block):
                    # inside the judge's clock: one write pass near memory bandwidth (runners/window_fill.py)
                    window_fill.fill(block, window_fill.key_of(seed, index, spec.name), scale * spec.scale)
                else:
                    block.normal_(mean=0.0, std=scale * spec.scale, generator=gen)
                if spec.vary:
                    self._structured_rows(spec.name, gen, scale, host)
        for t, source in self.copies:
            t.copy_(source)

    def _structured_rows(self, name: str, gen: torch.Generator, scale: float, host: torch.Generator) -> None:
        """The judge's window: in every slot one row near zero and another of a large dynamic range at its own scale
        (drawn per slot across SCALE_LOG10 in place of the block's ``scale``; rows drawn per fill for the even and
        the odd slots), as in the later trials (``make_tensor``): no unsafe path only in the timed calls (a softmax
        without its max: tests/test_judge_attacks_round7.py; with one scale a round, whether any slot overflowed
        was a coin flip a round). Strided products over two rows a slot, at most 2/rows of its bytes (an eighth
        at one row), so folding them into a kernel's loads gains nothing the clock credits."""
        shape = case_shapes(self.args, self.case)[name]
        block = self.blocks[name]
        numel = 1
        for d in shape:
            numel *= d
        if numel < 2:
            return
        one_row = len(shape) < 2 or shape[0] < 2  # decode or 1-D: a wide segment, an eighth of the slot at most
        width = min(numel, max(64, numel // 8)) if one_row else numel // shape[0]
        for parity in (0, 1):  # even and odd slots, each their own rows
            slots = block[parity::2]
            if one_row:
                wide = int(torch.randint(numel - width + 1, (1,), generator=host))
            else:
                near, row = structured_rows(shape[0], host)
                wide = row * width
                slots[:, near * width:(near + 1) * width].mul_(NEAR_ZERO)
            own = log_uniform(SCALE_LOG10, (slots.shape[0], 1), gen, self.device)
            factors = log_uniform(DYNAMIC_LOG10, width, gen, self.device)
            slots[:, wide:wide + width].mul_((own / scale * factors).to(block.dtype))


def clone_inputs(kwargs: dict) -> dict:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
