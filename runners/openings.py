"""Openings: a few chunks of EVERY opened slot's committed outputs, so that the judge checks the outputs of a whole
pass of its window and not only the few slots it can afford to show in full.

The window's commitment (runners/commitments.py) is a keyed tree over each output's int64 words, and the digest the
worker sends when the judge's clock stops is a BLAKE2b of the slots' hashes AND of every output's nodes at one level
of its tree (``CommitPlan.rows``: at most ``ROW_BUDGET_WORDS`` nodes a window; ``node_level``). After the clock the
worker shows those rows (they must hash to the digest) and, from a seed the judge sends only now, ``per`` chunks of
each opened output: the ``2**level`` words under a node. The judge climbs each chunk to its node itself, computes each
output's hash from its row, folds the slot's hashes (the numbers it returns shown as what the wire carries) to the
slot's committed hash, and compares the chunks with the oracle's. No node above a chunk is the worker's to choose:
a worker that skipped a call cannot show a right chunk computed afterwards (it misses the node committed to) nor the
stale one (wrong against the oracle's). (Round 10 and 11: with the sibling nodes of a path sent by the worker, the
tree's node solved for one of its words let any chunk climb to any committed hash.)

An output whose shape differs between slots (it follows a range scalar) has a block of rows per shape, each naming its
slots (``opened_in``). Where no level fits the budget (thousands of slots, decode sizes), or where the slots' outputs
differ in kind (a tensor in some, a number in others), an output has no rows and is not opened: the slots shown in
full, 16 a round, see a skipped share of those calls. ``open_slots`` runs in a worker (either side, after
``window``); ``check_openings`` and ``compare_chunks`` in the judge, on the CPU. Tests: tests/test_openings.py.
"""
from __future__ import annotations

import random
from pathlib import Path

import torch

from . import hash_tree
from .commitments import _bits, _compress, _Keyed, _leaf_word, _padded_words
from .compare import _narrowest_holding, _same_number, compare_tensor, first_bad_row, flatten
from .wire import WireError, decode_value, leaf_meta

MAX_OUTPUTS = 4096  # outputs of one slot the judge hashes (its work is bounded by what it asked for)
OUTPUTS = MAX_OUTPUTS  # the place, in what ``check_openings`` finds, of a slot's count of outputs (no output's)


def chunk_indices(seed: int, slot: int, position: int, chunks: int, per: int) -> list[int]:
    """Which of an output's ``chunks`` chunks (its row's nodes) are opened: ``per`` distinct ones, drawn from the seed
    the judge sends after the commitment (the same on both sides; the judge checks against its own draw)."""
    rng = random.Random(f"{seed}:{slot}:{position}:{chunks}")
    return sorted(rng.sample(range(chunks), min(per, chunks)))


def opened_in(slots: list[int], members) -> list[tuple[int, int]]:
    """The opened slots a block of rows holds, each with its row in the block's nodes (``members`` None: every slot,
    row = slot; else the block's slots, runners/commitments.py ``CommitPlan``: an output's slots of one shape)."""
    if members is None:
        return [(s, s) for s in slots]
    where = {m: i for i, m in enumerate(members)}
    return [(s, where[s]) for s in slots if s in where]


def _row(t: torch.Tensor) -> torch.Tensor:
    """The dense bytes of ``t`` as the commitment hashes them: one padded row of int64 words."""
    src = _bits(t.detach())
    nbytes = t.numel() * t.element_size()
    row = torch.zeros(8 * _padded_words(nbytes), dtype=torch.uint8, device=t.device)
    row[:nbytes].view(src.dtype).view(src.shape).copy_(src)
    return row.view(torch.int64)


def climb(x: torch.Tensor, level: int, to: int | None, k: _Keyed) -> torch.Tensor:
    """The tree's levels from ``level`` over each row of ``x``, up to level ``to`` (None: to the root, padding an odd
    level with a zero node as ``_hash_rows`` does): several at a launch where runners/hash_tree.py can (the same
    integers), one level of torch ops otherwise."""
    while (to is None and x.shape[1] > 1) or (to is not None and level < to):
        count = hash_tree.step(x) if to is None else min(hash_tree.step(x), to - level)
        if count:
            alphas = torch.tensor([k(level + i, odd=True) for i in range(count)], dtype=torch.int64).to(x.device)
            try:
                x, level = hash_tree.fold_levels(x, alphas), level + count
                continue
            except Exception as exc:  # noqa: BLE001 - the torch level below, the same integers
                hash_tree.BROKEN.append(f"{type(exc).__name__}: {exc}"[:300])
        if x.shape[1] % 2:
            x = torch.nn.functional.pad(x, (0, 1))
        x, level = _compress(x[:, 0::2], x[:, 1::2], k(level, odd=True)), level + 1
    return x


def _tail(root: torch.Tensor, nbytes: int, k: _Keyed) -> torch.Tensor:
    tail = torch.full_like(root, k(1000 + nbytes))
    return _compress(_compress(root, tail, k(999, odd=True)), tail, k(998, odd=True))


def open_slots(outputs: list, plan, slots: list[int], seed: int, per: int) -> dict:
    """A worker's answer, from the outputs and the ``CommitPlan`` that committed to them: per opened slot each output's
    hash (``hs``, as the plan folded them) and what the wire carries for each output that is not a tensor
    (``numbers``), and per output with rows ``groups`` of chunks (``words``: (slots, per, 2**level) int64 on the
    device, for runners/wire.py to carry)."""
    hs, numbers = {}, {}
    positions = {p: h.tolist() for p, h in plan.position_hashes.items()}  # one read-back of every output's hash
    for s in slots:
        leaves = flatten(outputs[s])
        hs[str(s)] = [int(positions[p][s]) if p in positions else 0 for p in range(len(leaves))]
        numbers[str(s)] = {str(p): leaf_meta(v) for p, v in enumerate(leaves) if not isinstance(v, torch.Tensor)}
    groups = []
    for p, level, nbytes, nodes, members in plan.rows:
        picked = [s for s, _ in opened_in(slots, members)]
        if not picked:
            continue
        size = 1 << level
        rows = torch.stack([_row(flatten(outputs[s])[p]) for s in picked])
        idx = torch.tensor([chunk_indices(seed, s, p, nodes.shape[1], per) for s in picked], dtype=torch.int64,
                           device=rows.device).reshape(len(picked), -1)
        offsets = (idx.unsqueeze(-1) * size + torch.arange(size, device=rows.device)).reshape(len(picked), -1)
        words = torch.gather(rows, 1, offsets).reshape(*idx.shape, size)
        dtype = str(flatten(outputs[picked[0]])[p].dtype).removeprefix("torch.")
        groups.append({"position": p, "first": members[0] if members else 0, "nbytes": nbytes, "dtype": dtype,
                       "slots": picked, "words": words})
    return {"hs": hs, "numbers": numbers, "groups": groups}


class OpeningError(Exception):
    """What an opening shows does not reach the commitment it was sent with (or is not what was asked)."""


def fold(hs: torch.Tensor, k: _Keyed) -> torch.Tensor:
    """Slots' commitments from their outputs' hashes ((S, P) int64, P outputs each), as runners/commitments.py
    ``CommitPlan`` folds them."""
    acc = torch.full((hs.shape[0], 1), k(77), dtype=torch.int64)
    for p in range(hs.shape[1]):
        acc = _compress(acc, hs[:, p:p + 1], k(2000 + p, odd=True))
    return acc[:, 0]


def check_openings(reply: dict, decode, commits: list[int], rows: dict, slots: list[int], seed: int, per: int,
                   key: int) -> dict[tuple[int, int], dict]:
    """The judge's side. ``rows``: (position, first slot) -> (level, nbytes, nodes (slots, n) int64, members: None
    for every slot, else the block's slots), already checked against the digest. Each opened slot's outputs' hashes
    (those with rows computed here from them, numbers from what the wire carries) must fold to its committed hash,
    and every chunk climb to its node. ``decode(meta, max_bytes)`` reads a
    carried tensor. Returns, per (slot, position), ``{"nbytes", "dtype", "chunks": {index: bytes}}`` (each chunk's
    bytes within the output; the dtype as the worker names it) or ``{"value": ...}`` for a number, a string or None.
    Raises OpeningError."""
    k = _Keyed(key)
    hs_all, numbers = (reply.get("hs"), reply.get("numbers")) if isinstance(reply, dict) else (None, None)
    if not isinstance(hs_all, dict) or not isinstance(numbers, dict):
        raise OpeningError("no hashes of the opened slots")
    hs: dict[int, list[int]] = {}
    for s in slots:
        row = hs_all.get(str(s))
        if not isinstance(row, list) or len(row) > MAX_OUTPUTS or \
                not all(type(h) is int and -2**63 <= h < 2**63 for h in row):
            raise OpeningError(f"slot {s}: its outputs' hashes are missing or not 64-bit integers")
        hs[s] = list(row)
    found: dict[tuple[int, int], dict] = {}
    covered, expected = set(), {}
    for (p, first), (level, nbytes, nodes, members) in rows.items():  # outputs with rows: the judge hashes them
        picked = opened_in(slots, members)
        if not picked:
            continue
        expected[(p, first)] = picked
        mine = climb(nodes[[i for _, i in picked]], level, None, k)[:, 0]
        for (s, _), h in zip(picked, _tail(mine, nbytes, k).tolist()):
            if p >= len(hs[s]):
                raise OpeningError(f"slot {s}: output {p} is missing")
            hs[s][p] = int(h)
            covered.add((s, p))
    for s in slots:  # each output that is not a tensor: what the wire carries, hashed to its word
        metas = numbers.get(str(s))
        if not isinstance(metas, dict):
            raise OpeningError(f"slot {s}: its outputs that are not tensors were not shown")
        for key_p, meta in metas.items():
            p = int(key_p) if isinstance(key_p, str) and key_p.isascii() and key_p.isdigit() else -1
            if not 0 <= p < len(hs[s]) or (s, p) in covered:
                raise OpeningError(f"slot {s}: an output that is not a tensor at a place it has none")
            # one leaf, as the plan folded it: a list or a map would decode to a container whose word is one
            # constant whatever it holds (round 12: a count skipped in the timed pass, shown right inside a list)
            if not (isinstance(meta, dict) and meta.get("kind") in ("scalar", "none", "other")):
                raise OpeningError(f"slot {s}: output {p} is not a single number, string or None")
            try:
                value = decode_value(meta, Path("/nonexistent"), 0)
            except WireError as exc:
                raise OpeningError(f"slot {s}: output {p} could not be read: {exc}") from exc
            if isinstance(value, (torch.Tensor, list, tuple, dict)):
                raise OpeningError(f"slot {s}: output {p} is not the value committed to when the pass ended")
            hs[s][p] = _leaf_word(value)
            found[(s, p)] = {"value": value}
        found[(s, OUTPUTS)] = {"count": len(hs[s])}  # every word the fold takes is held to the baseline's outputs
    by_width: dict[int, list[int]] = {}
    for s in slots:
        by_width.setdefault(len(hs[s]), []).append(s)
    for members in by_width.values():  # the slots with as many outputs at once
        got = fold(torch.tensor([hs[s] for s in members], dtype=torch.int64).reshape(len(members), -1), k)
        bad = (got != torch.tensor([commits[s] for s in members], dtype=torch.int64)).nonzero().flatten().tolist()
        if bad:
            raise OpeningError(f"slot {members[bad[0]]}: its outputs are not the ones committed to when the pass ended")
    seen = set()
    groups = reply.get("groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise OpeningError("the opened groups are not a list of groups")
    for g in groups:
        p, first, members = g.get("position"), g.get("first"), g.get("slots")
        if type(p) is not int or type(first) is not int:
            raise OpeningError("an opened group names no output")
        block = (p, first)
        if block not in expected or block in seen or members != [s for s, _ in expected[block]] \
                or g.get("nbytes") != rows[block][1]:
            raise OpeningError("an opened group names slots or outputs that were not asked for")
        seen.add(block)
        level, nbytes, nodes, _ = rows[block]
        size = 1 << level
        idx = torch.tensor([chunk_indices(seed, s, p, nodes.shape[1], per) for s in members], dtype=torch.int64)
        idx = idx.reshape(len(members), -1)
        words = decode(g.get("words"), idx.numel() * 8 * size)
        if not _is_int64(words, (*idx.shape, size)):
            raise OpeningError(f"output {p}: the opened chunks have the wrong form")
        got = climb(words.reshape(-1, size), 0, level, k)[:, 0].reshape(idx.shape)
        want = torch.gather(nodes[[i for _, i in expected[block]]], 1, idx)
        bad = (got != want).any(1).nonzero().flatten().tolist()
        if bad:
            raise OpeningError(f"slot {members[bad[0]]}: an opened chunk of output {p} is not the one committed to "
                               f"when the pass ended (computed after the clock stopped)")
        raw = words.contiguous()
        for r, s in enumerate(members):
            chunks = {}
            for c, index in enumerate(idx[r].tolist()):
                lo = index * 8 * size
                chunks[index] = bytes(raw[r, c].view(torch.uint8)[:max(0, min(8 * size, nbytes - lo))].numpy())
            found[(s, p)] = {"nbytes": nbytes, "dtype": str(g.get("dtype")), "chunks": chunks}
    if set(expected) - seen:
        raise OpeningError(f"output {min(set(expected) - seen)[0]} was not opened")
    return found


def _is_int64(t, shape: tuple) -> bool:
    return isinstance(t, torch.Tensor) and type(t) is torch.Tensor and t.dtype == torch.int64 \
        and tuple(t.shape) == tuple(shape)


def compare_chunks(got: dict, ref: dict, tolerance_of, ratios: dict | None = None) -> str:
    """The candidate's opened chunks against the oracle's at the same places, element by element with the output's
    tolerance (``tolerance_of(dtype)``, the judge's table), read as the oracle's dtype: all chunks of one output
    position and length in one comparison; numbers as the judge compares them. ``ratios``: per output position, how
    much smaller the window's outputs are than at the case's first trial, and that first scale (runners/compare.py
    ``scale_ratios``); below 1, each chunk's whole error is also held to its size (``first_bad_row``), as a slot
    shown in full is.
    '' if all agree, else why (the first slot that disagrees)."""
    batches: dict[tuple, list] = {}
    extra = sorted(set(got) - set(ref))
    if extra:  # a word the judge would fold without comparing anything (round 11's review)
        return f"slot {extra[0][0]}: output {extra[0][1]} is one the baseline does not return"
    for (s, p), want in ref.items():
        have = got.get((s, p))
        if p == OUTPUTS:
            if have != want:
                return f"slot {s}: {(have or {}).get('count')} outputs, the baseline's {want['count']}"
            continue
        if "value" in want or (have is not None and "value" in have):  # a number, a string, None
            if have is None or "value" not in have or "value" not in want:
                return f"slot {s}: output {p} is a {'tensor' if have and 'value' not in have else 'value'} where " \
                       f"the baseline's is not"
            o, r = have["value"], want["value"]
            if not _same_number(o, r, tolerance_of(_narrowest_holding(r))):
                return f"slot {s}: output {p}: {o!r} != expected {r!r}"
            continue
        if have is None or have["nbytes"] != want["nbytes"]:
            return f"slot {s}: output {p} is missing or not a tensor of the baseline's size ({want['nbytes']} bytes)"
        dtype = getattr(torch, want["dtype"], None)
        exact = not isinstance(dtype, torch.dtype) or dtype.is_complex or \
            torch.empty(0, dtype=dtype).element_size() > 8  # compared byte for byte, as compare_tensor does them
        for index, data in want["chunks"].items():
            mine = have["chunks"].get(index)
            if mine is None or len(mine) != len(data):
                return f"slot {s}: output {p}, chunk {index} was not opened"
            if exact and mine != data:
                return f"slot {s}: output {p}, chunk {index} differs (exact match required)"
            if data and not exact:
                batches.setdefault((p, dtype, len(data)), []).append((s, index, mine, data))
    for (p, dtype, _), items in batches.items():
        a = torch.frombuffer(bytearray(b"".join(m for _, _, m, _ in items)), dtype=dtype).reshape(len(items), -1)
        b = torch.frombuffer(bytearray(b"".join(d for _, _, _, d in items)), dtype=dtype).reshape(len(items), -1)
        tol = tolerance_of(dtype)
        if compare_tensor(a, b, tol, "").ok:
            ratio, first = (ratios or {}).get(p, (1.0, 0.0))
            row = first_bad_row(a, b, tol, ratio, first) if ratio < 1.0 and dtype.is_floating_point else None
            if row is not None:
                s, index = items[row][:2]
                cmp = compare_tensor(a[row], b[row], tol, f"output {p}, chunk {index}", ratio, first)
                return f"slot {s}: {cmp.message}"
            continue
        for row, (s, index, _, _) in enumerate(items):
            cmp = compare_tensor(a[row], b[row], tol, f"output {p}, chunk {index}")
            if not cmp.ok:
                return f"slot {s}: {cmp.message}"
    return ""
