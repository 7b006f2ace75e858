"""Inputs laid out as callers pass them, beyond the dense ones: a view into a wider buffer (``strided``, with finite
padding the judge draws like the tensor's own values), every 2-D+ tensor as the first columns of wider rows (the
layout trial's ``row_padded``), and -inf where callers mask scores (the masked trial's ``masked_rows``). The judge
tries them per case (runners/judge.py ``_check_layout``, ``_check_masked``); nothing in them marks the trial."""
from __future__ import annotations

import math

import torch

from .shapes import view_span


def strided(t: torch.Tensor, strides: list[int] | None, gen: torch.Generator | None = None,
            offset: int = 0, spread: bool = True) -> torch.Tensor:
    """``t``'s values in a tensor with the given strides (a captured, non-contiguous layout), ``offset`` elements
    into its storage. The storage runs to the end of the outermost dimension's last step, as a slice's of a wider
    buffer does (``qkv[:, :H]``: rows x row stride), and its places outside the view hold values drawn with ``gen``
    (``padding_like``: finite, of ``t``'s own scale), or 0 without one; never what the allocator left there (on
    the H200 that was the dense values of the call before, and a kernel that ignores the strides read the right
    rows out of stale memory, seeming to take the layout: Liger's geglu_forward). The judge's inputs travel with
    their whole storage (runners/wire.py), so both workers see the same bytes in it."""
    if not strides or (list(t.stride()) == list(strides) and not offset):
        return t
    if not t.numel() or min(strides) < 0:
        out = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device)
    else:
        span = view_span(t.shape, strides)
        size = max(offset + span, max(n * s for n, s in zip(t.shape, strides)))
        storage = padding_like(t, size, gen, spread) if gen is not None else \
            torch.zeros(size, dtype=t.dtype, device=t.device)
        out = storage.as_strided(t.shape, strides, offset)
    out.copy_(t)
    return out


# A padding value is a + w (b - a) for two of the tensor's own values a, b. Two kinds, both tried at every case
# (runners/judge.py ``_check_layout``), so that a kernel that keys on either fails the other
# (tests/test_judge_attacks_round6.py: a kernel took the strides only when the padding lay inside the view's
# range): ``spread=False``, w in (0, PAD_MIX] (inside the view's range); ``spread=True``, w in [-1, 2) and each
# value times a factor log-uniform in 10**(+-PAD_SPREAD_LOG10) (past the view's extremes, as a caller's
# neighbouring data, k and v beside q, may be). Finite either way.
PAD_MIX, PAD_SPREAD_LOG10 = 0.5, 2.0


def padding_like(t: torch.Tensor, size: int, gen: torch.Generator, spread: bool = True) -> torch.Tensor:
    """``size`` values like ``t``'s, to lie around it in a wider buffer as a caller's neighbouring data does (the
    rest of a fused qkv, the other columns of a wide activation): floating ones ``a + w (b - a)`` for two of
    ``t``'s finite values at two places drawn at random (``spread``: see ``PAD_SPREAD_LOG10``); integers and
    bools drawn from ``t``'s as they are (indices stay indices). A kernel that reads them instead of its own rows
    gets finite, wrong values."""
    flat = t.detach().reshape(-1)
    floating = t.dtype.is_floating_point
    if floating:
        flat = flat[torch.isfinite(flat.float())]  # float8 has no isfinite of its own
        if not flat.numel():
            return torch.zeros(size, dtype=t.dtype, device=t.device)

    n = flat.numel()
    first = torch.randint(n, (size,), generator=gen, device=gen.device)
    if not floating:
        return flat[first.to(t.device)]
    # another place than the first's (a value mixed with itself would be a copy), and a weight above 0
    second = (first + 1 + torch.randint(max(1, n - 1), (size,), generator=gen, device=gen.device)) % n
    a, b = flat[first.to(t.device)].float(), flat[second.to(t.device)].float()
    if not spread:
        w = PAD_MIX * (1 - torch.rand(size, generator=gen, device=gen.device))
        return (a + w.to(t.device) * (b - a)).to(t.dtype)
    w = -1.0 + 3.0 * torch.rand(size, generator=gen, device=gen.device)
    factor = 10 ** (PAD_SPREAD_LOG10 * (2 * torch.rand(size, generator=gen, device=gen.device) - 1))
    values = (a + w.to(t.device) * (b - a)) * factor.to(t.device)
    big = torch.finfo(t.dtype).max / 4  # finite in the tensor's dtype
    return values.clamp(-big, big).to(t.dtype)


# A row-padded layout: the same values, every tensor of two or more dimensions the first columns of wider rows (a
# caller's slice of a wider buffer, ``qkv[:, :H]``). Each argument's pad is drawn per trial (``_pad_elems``: whole
# rows or 16-byte steps up to PAD_ROWS rows; fixed widths were told apart: tests/test_judge_attacks_round6.py); a
# view starts 16-byte aligned into its row (``qkv[:, H:2H]``). Over PAD_BIG_BYTES, at most one row of pad.
PAD_ROWS, PAD_BIG_BYTES = 4, 64 << 20
VIEW_ALIGN_BYTES = 16
WHOLE_ROW_SHARE = 0.5  # of the pads drawn: a whole number of rows (``_pad_elems``); the rest 16-byte steps


def _pad_elems(t: torch.Tensor, gen: torch.Generator, taken: set[int]) -> int:
    """One argument's row pad, in elements: drawn from ``gen``, and not one another argument of the call has (a
    kernel that addresses one input with another's strides is then wrong, as for a caller passing one strided
    input beside another). A share of the draws (``WHOLE_ROW_SHARE``) are whole rows, 1 to PAD_ROWS of them: a
    fused qkv's q, whose row stride is a multiple of its row, is what callers pass most, and a log-uniform width
    lands on a multiple of the row rarely (a kernel wrong only there went unseen)."""
    unit = max(1, VIEW_ALIGN_BYTES // t.element_size())
    row = t.shape[-1] * t.element_size()
    rows = PAD_ROWS if t.numel() * t.element_size() <= PAD_BIG_BYTES else 1
    most = max(4, (row * rows) // VIEW_ALIGN_BYTES)
    whole, u = (float(x) for x in torch.rand(2, generator=gen, device=gen.device))
    if whole < WHOLE_ROW_SHARE:
        pad = t.shape[-1] * (1 + int(u * rows))
    else:
        steps = int(math.exp(u * math.log(most + 1)))
        pad = unit * max(1, min(most, steps))
    while pad in taken:
        pad += unit
    taken.add(pad)
    return pad


def row_padded(kwargs: dict, keep=(), every_level: bool = False,
               gen: torch.Generator | None = None, spread: bool = True) -> tuple[dict, list[str]]:
    """``kwargs`` with every dense tensor of two or more dimensions (but those named in ``keep``: a captured
    layout) copied into a padded layout; returns the new arguments and the names of those changed. Rows are padded;
    with ``every_level`` each outer dimension too (q and k split from a fused qkv: the token stride is not
    heads x the head stride). Each view starts at an offset drawn from ``gen`` within its row's padding (0, as
    ``qkv[:, :H]``, up to all of it, as ``qkv[:, H:2H]``), in a storage of rows x row stride, and the padding
    holds values drawn from ``gen`` like the tensor's own (``padding_like``): nothing in the storage tells the
    trial from a caller's slice, and a kernel that reads the padding, ignoring the strides, gives finite, wrong
    values, which the judge does not hold the candidate to (the baseline) or refuses (the candidate). The judge
    passes ``gen`` seeded per trial from its secret; without one the draws are seeded 0."""
    out, changed, taken = dict(kwargs), [], set()
    for name, t in kwargs.items():
        if not isinstance(t, torch.Tensor) or t.dim() < 2 or not t.numel() or name in keep or not t.is_contiguous():
            continue
        if every_level and t.dim() < 3:
            continue
        if gen is None:
            gen = torch.Generator(device=t.device).manual_seed(0)
        pad = _pad_elems(t, gen, taken)
        strides = [1, t.shape[-1] + pad]
        for d in reversed(t.shape[1:-1]):
            strides.append(strides[-1] * d + (pad if every_level else 0))
        align = max(1, VIEW_ALIGN_BYTES // t.element_size())
        offset = align * int(torch.randint(pad // align + 1, (1,), generator=gen, device=gen.device))
        out[name] = strided(t, list(reversed(strides)), gen, offset, spread)
        changed.append(name)
    return out, changed


def warm_layouts(kwargs: dict, keep=()) -> list[dict]:
    """Empty inputs in row-padded layouts like the layout trial's (``row_padded``), one per class of strides that
    Triton compiles a kernel for (a stride divisible by 16 or not, per argument): every argument padded by its
    smallest unit, every one by 16 elements, and the two alternations of those; each also with every level padded
    where a tensor has three or more dimensions. For compiling ahead only (runners/warm.py): no values."""
    names = [n for n, t in kwargs.items() if isinstance(t, torch.Tensor) and t.dim() >= 2 and t.numel()
             and n not in keep and t.is_contiguous()]
    if not names:
        return []
    units = {n: max(1, VIEW_ALIGN_BYTES // kwargs[n].element_size()) for n in names}
    patterns = {tuple(units[n] if (k + flip) % 2 else 16 for k, n in enumerate(names)) for flip in (0, 1)}
    patterns |= {tuple(units[n] for n in names), tuple(16 for _ in names)}
    levels = [False, True] if any(kwargs[n].dim() >= 3 for n in names) else [False]
    out = []
    for every_level in levels:
        for pads in sorted(patterns):
            variant = dict(kwargs)
            for n, pad in zip(names, pads):
                t = kwargs[n]
                if every_level and t.dim() < 3:
                    continue
                strides = [1, t.shape[-1] + pad]
                for d in reversed(t.shape[1:-1]):
                    strides.append(strides[-1] * d + (pad if every_level else 0))
                variant[n] = torch.empty_strided(t.shape, list(reversed(strides)), dtype=t.dtype, device=t.device)
            out.append(variant)
    return out


def masked_rows(kwargs: dict, gen: torch.Generator, keep=(), lowest: bool = False) -> tuple[dict, list[str]]:
    """``kwargs`` with -inf where callers put it to mask scores, in every floating tensor of two or more
    dimensions with rows of at least 4, at rows drawn from ``gen`` (a guard kept only on fixed rows passed: round
    7), two of each pattern where there are rows: a masked prefix (left padding, a sliding window's past), a masked
    suffix (a causal mask's future, right padding), each three quarters of the row (longer than any block a kernel
    walks it in, from either end), a masked run in the middle, -inf at about half its places. A tensor of one row
    gets the prefix or the suffix, drawn. Returns the new arguments and the names of those changed.

    ``lowest``: large finite negative values instead of -inf (an additive mask), and two rows of them whole first (a
    padding row, every score masked: a softmax's answer there is uniform, and a kernel that skips masked tiles can
    forget it; round 17): one at the dtype's lowest (``finfo.min``, as Hugging Face's attention adds), the other
    rows at a value drawn from ``gen`` above it, -1e4 as older models add or a power of ten up to the dtype's range
    (round 18: with ``finfo.min`` alone, a kernel that zeroed rows all at -1e4 passed)."""
    out, changed = dict(kwargs), []
    if lowest:  # -1e4, or 10 ** u for u drawn in [4, the dtype's range less 0.05): never its lowest, once rounded
        exact, u = bool(torch.randint(2, (1,), generator=gen, device=gen.device)), float(torch.rand(1, generator=gen,
                                                                                                  device=gen.device))
    for name, t in kwargs.items():
        if (not isinstance(t, torch.Tensor) or not t.dtype.is_floating_point or t.dim() < 2 or t.shape[-1] < 4
                or not t.numel() or name in keep):
            continue
        rows = t.detach().clone().reshape(-1, t.shape[-1])
        n = rows.shape[1]
        span = (3 * n + 3) // 4
        first = int(torch.randint(2, (1,), generator=gen, device=gen.device)) if rows.shape[0] == 1 else 0
        patterns = [slice(0, span), slice(n - span, n), slice(n // 8, n // 8 + n // 2), None][first:]
        fills = [float("-inf")] * len(patterns)
        if lowest:
            least = float(torch.finfo(rows.dtype).min)
            drawn = -1e4 if exact else -10.0 ** (4 + (math.log10(-least) - 4.05) * u)
            patterns, fills = [slice(0, n), slice(0, n)] + patterns, [least] + [drawn] * (len(patterns) + 1)
        order = torch.randperm(rows.shape[0], generator=gen, device=gen.device).tolist()
        for j, r in enumerate(order[: 2 * len(patterns)]):
            cols = patterns[j % len(patterns)]
            if cols is None:  # holes
                cols = torch.rand(n, generator=gen, device=gen.device) < 0.5
                cols[int(torch.randint(n, (1,), generator=gen, device=gen.device))] = False  # one stays finite
                cols = cols.to(rows.device)
            rows[r, cols] = fills[j % len(patterns)]
        out[name] = strided(rows.reshape(t.shape), list(t.stride()))
        changed.append(name)
    return out, changed


def layouts_to_try(changed: list[bool], most: int, seed: int) -> list[int]:
    """Which of the padded layouts a case tries: those that change an input, at most ``most`` of them drawn from
    ``seed`` (the judge's secret: a candidate cannot tell which), in order."""
    usable = [k for k, c in enumerate(changed) if c]
    if len(usable) <= most:
        return usable
    g = torch.Generator().manual_seed(seed)
    return sorted(usable[i] for i in torch.randperm(len(usable), generator=g)[:max(0, most)].tolist())


def same_layout(shape, want, got) -> bool:
    """Strides that address the same places: a dimension of size 1 is never stepped along, so its stride is
    free (``empty_like`` of a one-row slice keeps the slice's row stride; H200, every rms_norm cheat at T=1
    was refused for that instead of for its cheat), and an empty tensor has no places at all."""
    if any(n == 0 for n in shape):
        return True
    if want is None or got is None or not len(want) == len(got) == len(shape):
        return want == got
    return all(n == 1 or a == b for n, a, b in zip(shape, want, got))
