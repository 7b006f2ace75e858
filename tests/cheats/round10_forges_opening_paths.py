"""Cheat (round 10): the openings' tree paths forged, so that skipped slots pass the window's openings.

(Written against the openings' first form, which took each chunk's path of sibling nodes from the worker; the judge
no longer does: the digest covers every output's chunk-level nodes and the judge climbs each chunk to its node. The
worker handlers below speak the first form and are refused; ``solve_left`` is kept for tests/test_judge_attacks_round10.py.)

The openings (runners/openings.py) show a few chunks of every opened slot with the sibling node at each level above
the chunk, up to the output's hash, which must fold to the slot's committed hash. The siblings are the worker's to
choose; the path is binding only if no worker can find a sibling that sends a chosen node to a given parent. The
tree's node is ``_compress(a, b, alpha) = rot32(a + alpha*b) * (2b + 1) + a`` (runners/commitments.py). For a given
right word ``b`` and parent ``R``, put ``z = a + alpha*b``: the equation is ``z + m * rot32(z) = R + alpha*b``
(mod 2**64, ``m = 2b + 1``), and with ``z = zh * 2**32 + zl`` the left side is
``zl * (1 + m * 2**32) + zh * (m + 2**32)``: LINEAR in the two 32-bit halves of ``z``. A 2-D lattice (Lagrange
reduction, then the few lattice points near the box ``[0, 2**32)**2``) gives the solution where there is one
(about 7 times in 10; else another free sibling below is drawn and it is tried again): well under a millisecond
on Python ints (``solve_left``). The feed-forward ``+ a`` was meant to stop exactly this (its docstring); it did not.
(Closed this round: the node is now mixed, ``G(v) + a + b`` with xor-shifts and a multiplication, and the lattice no
longer solves it; ``comp`` below is the new node, so this worker's fake trees and climbs are the judge's own.)

So a chunk's path can be sent anywhere at the first level where its ancestor is a RIGHT child: the sibling there is
the left word, solved for. Every chunk but chunk 0 (and chunk 1, which has no free sibling below it) has one.
Inside the judge's clock, for each slot it skips, this worker commits to a fake tree per output: chunks 0 and 1
computed honestly (the first 128 bytes of the output: a part of its first row, in torch), random right siblings up
the left edge of the tree (the "spine"), the spine's root, the tail and the fold computed forwards: a few dozen
integer operations a slot. After the clock (``reveal``, untimed) it computes the skipped slots' outputs, and for
each opened chunk climbs from its true words with random siblings, solves the sibling at its highest right turn
so that the climb lands on the spine's node, and goes on up the spine. The judge's path check, the fold and
``compare_chunks`` all pass; only a full reveal of a skipped slot (2 of 12 here, 2 of 13-48 at prefill sizes on the
H200) can catch it. Back to round 4's odds (tests/test_judge_attacks_round4.py, section 5), for any share of the
slots: this worker runs only the first half of each pass and reports its samples at half.

Outside the judge's worker (imported by a test, no ``serve`` frame) only the kernel and the forging functions are
defined. The kernel itself is the baseline's.
"""
import random

import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_C = _imp("runners.commitments", fromlist=["MIX", "_constant", "_padded_words", "commitments", "digest"])
_O = _imp("runners.openings", fromlist=["open_slots", "chunk_indices", "chunk_level", "widths"])
_wire = _imp("runners.wire", fromlist=["encode_value"])
_M = (1 << 64) - 1


# ---- the kernel: the baseline's ----------------------------------------------------------------------------------
@triton.jit
def _rms_kernel(x_ptr, r_ptr, w_ptr, out_ptr, r_out_ptr, sx, sr, N, eps, HAS_RESIDUAL: tl.constexpr,
                BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * sx + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(r_ptr + row * sr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(r_out_ptr + row * N + offs, x.to(r_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1])
    if x.stride(-1) != 1:
        x = x.contiguous()
    rows, n = x.shape
    out = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    r = x
    if residual is not None:
        r = residual.reshape(-1, n)
        r = r if r.stride(-1) == 1 else r.contiguous()
    r_out = torch.empty_like(out) if residual is not None else out
    _rms_kernel[(rows,)](x, r, weight, out, r_out, x.stride(0), r.stride(0), n, eps,
                         HAS_RESIDUAL=residual is not None, BLOCK=triton.next_power_of_2(n))
    if residual is None:
        return out.view(shape)
    return out.view(shape), r_out.view(shape)


def _first_rows(hidden_states, weight, eps=1e-6, residual=None, rows=1):
    """The first ``rows`` rows of the outputs, in torch (no kernel launch): enough for chunks 0 and 1."""
    h = hidden_states.shape[-1]
    x = hidden_states.reshape(-1, h)[:rows].float()
    if residual is not None:
        x = x + residual.reshape(-1, h)[:rows].float()
    y = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return (y, x.to(hidden_states.dtype)) if residual is not None else y


# ---- the tree on Python ints ---------------------------------------------------------------------------------
def _u(v: int) -> int:
    return v & _M


def _s(v: int) -> int:
    v &= _M
    return v - (1 << 64) if v >> 63 else v


def _rot(v: int) -> int:
    return ((v >> 32) | (v << 32)) & _M


def comp(a: int, b: int, alpha: int) -> int:
    """runners/commitments.py ``_compress`` on unsigned Python ints (the mixed form since this round; the lattice of
    ``solve_left`` is for the form before it, ``rot32(a + alpha*b) * (2b + 1) + a``, and no longer solves it)."""
    a, b, alpha = _u(a), _u(b), _u(alpha)
    v = (_rot((a + alpha * b) & _M) * (2 * b + 1) + a) & _M
    v ^= v >> 32
    v = (v * _C.MIX) & _M
    v ^= v >> 32
    return (v + a + b) & _M


def k(key: int, salt: int, odd: bool = False) -> int:
    return _u(_C._constant(key, salt) | int(odd))


def solve_left(b: int, parent: int, alpha: int):
    """An ``a`` with ``comp(a, b, alpha) == parent``, or None: ``z = a + alpha*b`` solves
    ``zl * (1 + m 2**32) + zh * (m + 2**32) = parent + alpha*b`` (mod 2**64) with both halves under 2**32."""
    from fractions import Fraction
    import math

    b, parent, alpha = _u(b), _u(parent), _u(alpha)
    m = (2 * b + 1) & _M
    big_a, big_b = (1 + (m << 32)) & _M, ((1 << 32) + m) & _M
    c = (parent + alpha * b) & _M
    inv = pow(big_a, -1, 1 << 64)
    e, d = (c * inv) & _M, (-big_b * inv) & _M
    u, v = (1, d), (0, 1 << 64)  # lattice of (zh, zl - e): zl - e = d*zh (mod 2**64)

    def n2(x):
        return x[0] * x[0] + x[1] * x[1]

    if n2(u) > n2(v):
        u, v = v, u
    while True:  # Lagrange-Gauss reduction
        mu = round(Fraction(u[0] * v[0] + u[1] * v[1], n2(u)))
        v = (v[0] - mu * u[0], v[1] - mu * u[1])
        if n2(v) >= n2(u):
            break
        u, v = v, u
    lo, hi = (0, -e), ((1 << 32) - 1, (1 << 32) - 1 - e)
    centre = (Fraction(lo[0] + hi[0], 2), Fraction(lo[1] + hi[1], 2))
    det = u[0] * v[1] - u[1] * v[0]
    beta = (u[0] * centre[1] - u[1] * centre[0]) / Fraction(det)
    for j in range(math.floor(beta) - 4, math.floor(beta) + 6):
        p0 = (j * v[0], j * v[1])
        i_lo, i_hi, inside = -(10 ** 40), 10 ** 40, True
        for dim in range(2):
            if u[dim] == 0:
                inside &= lo[dim] <= p0[dim] <= hi[dim]
                continue
            a1, a2 = Fraction(lo[dim] - p0[dim], u[dim]), Fraction(hi[dim] - p0[dim], u[dim])
            a1, a2 = min(a1, a2), max(a1, a2)
            i_lo, i_hi = max(i_lo, math.ceil(a1)), min(i_hi, math.floor(a2))
        if inside and i_lo <= i_hi:
            zh, w = p0[0] + i_lo * u[0], p0[1] + i_lo * u[1]
            a = (((zh << 32) | (w + e)) - alpha * b) & _M
            if solves(a, b, alpha, parent):
                return a
    return None


def unmixed(a: int, b: int, alpha: int) -> int:
    """The node before this round: ``rot32(a + alpha*b) * (2b + 1) + a``, the form the lattice solves."""
    return (_rot((a + alpha * b) & _M) * (2 * b + 1) + a) & _M


def solves(a: int, b: int, alpha: int, parent: int) -> bool:
    """The lattice's answer takes the node to ``parent``: the unmixed one's, for the test's control, or the judge's."""
    return unmixed(a, b, alpha) == parent or comp(a, b, alpha) == parent


def climb_words(words: list, key: int) -> int:
    """A chunk's node: the tree over its ``2**j`` words (runners/openings.py ``_climb`` from level 0)."""
    x, level = [_u(w) for w in words], 0
    while len(x) > 1:
        x = [comp(x[2 * i], x[2 * i + 1], k(key, level, True)) for i in range(len(x) // 2)]
        level += 1
    return x[0]


def tail(root: int, nbytes: int, key: int) -> int:
    t = k(key, 1000 + nbytes)
    return comp(comp(root, t, k(key, 999, True)), t, k(key, 998, True))


def fold(hs: list, key: int) -> int:
    acc = k(key, 77)
    for p, h in enumerate(hs):
        acc = comp(acc, h, k(key, 2000 + p, True))
    return acc


def words_of(t: torch.Tensor) -> list:
    """The output's dense bytes as the tree's words (zero-padded to whole words)."""
    raw = t.detach().contiguous().reshape(-1).view(torch.uint8).cpu()
    raw = torch.cat([raw, torch.zeros(-raw.numel() % 8, dtype=torch.uint8)])
    return [_u(w) for w in raw.view(torch.int64).tolist()]


def fake_tree(first_words: list, nbytes: int, key: int, rng: random.Random) -> dict:
    """A tree committed to without the output: chunk 0 and 1 from ``first_words`` (the first ``2 * 2**j`` words, as
    computed), random right siblings up the left edge. Returns the spine's nodes and siblings per level and the
    output's hash."""
    j, widths = _O.chunk_level(nbytes), _O.widths(nbytes)
    size = 1 << j
    first = first_words + [0] * (2 * size - len(first_words))
    x0, x1 = climb_words(first[:size], key), climb_words(first[size:2 * size], key)
    spine, sib = {j: x0}, {}
    for level in range(j, len(widths) - 1):
        sib[level] = (x1 if level == j else rng.getrandbits(64)) if widths[level] >= 2 else 0
        spine[level + 1] = comp(spine[level], sib[level], k(key, level, True))
    return {"j": j, "spine": spine, "sib": sib, "hash": tail(spine[len(widths) - 1], nbytes, key),
            "first": first[:2 * size]}


def forge_path(tree: dict, nbytes: int, index: int, words: list, key: int, rng: random.Random, tries: int = 64):
    """Siblings that take chunk ``index`` (its true ``words``) up to the fake tree's hash; None if none was found."""
    j, widths = tree["j"], _O.widths(nbytes)
    depth = len(widths) - 1 - j
    spine, sib = tree["spine"], tree["sib"]
    if index < 2:
        return [spine[j] if index == 1 and d == 0 else sib[j + d] for d in range(depth)]
    top = index.bit_length() - 1  # the highest level (above j) at which the ancestor is a right child
    x0 = climb_words(words, key)
    for _ in range(tries):
        x, node, path = x0, index, []
        for d in range(top):
            w = widths[j + d]
            s = 0 if (node ^ 1) >= w else rng.getrandbits(64)
            alpha = k(key, j + d, True)
            x = comp(x, s, alpha) if node % 2 == 0 else comp(s, x, alpha)
            path.append(s)
            node //= 2
        a = solve_left(x, spine[j + top + 1], k(key, j + top, True))
        if a is not None:
            return path + [a] + [sib[j + d] for d in range(top + 1, depth)]
    return None


# ---- the worker's handlers (only inside the judge's worker) ---------------------------------------------------
def _handlers():
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return None if frame is None else frame.f_locals["handlers"]


_h = _handlers()
_state: dict = {}


def _window(req):
    server = _h_orig["window"].__self__
    timer = server.timers["window"]
    seed, key = int(req["seed"]), int(req.get("key", 0))
    timer.bank.fill(seed)
    count = len(timer.slots)
    skipped = list(range(count - count // 2, count))
    rng = random.Random(seed ^ 0x51DE)
    hashes, trees = [], {}
    for s in range(count):
        if s not in skipped:
            timer.outputs[s] = timer.fn(**timer.slots[s])
            hashes.append(_C.commitments([timer.outputs[s]], key)[0])
            continue
        firsts = _imp("runners.compare", fromlist=["flatten"]).flatten(_first_rows(**timer.slots[s], rows=2))
        shapes = _imp("runners.compare", fromlist=["flatten"]).flatten(timer.outputs[s])  # last pass's: the sizes
        trees[s] = []
        for first, like in zip(firsts, shapes):
            nbytes = like.numel() * like.element_size()
            need = 2 << _O.chunk_level(nbytes)
            trees[s].append((nbytes, fake_tree(words_of(first)[:need], nbytes, key, rng)))
        hashes.append(_s(fold([t["hash"] for _, t in trees[s]], key)))
    timer.committed = torch.tensor(hashes, dtype=torch.int64)
    _state.update(key=key, trees=trees, rng=rng)
    return {"ok": True, "pass_us": 1.0, "commitment": _C.digest(timer.committed, key)}


def _reveal(req):
    server = _h_orig["reveal"].__self__
    timer = server.timers["window"]
    if not _state:
        return _h_orig["reveal"](req)
    key, trees, rng = _state["key"], _state["trees"], _state["rng"]
    for s in trees:  # the skipped slots, computed now, off the clock
        timer.outputs[s] = timer.fn(**timer.slots[s])
    reply = _h_orig["reveal"]({**req, "open": None})
    o = req.get("open")
    if not o:
        return reply
    slots, oseed, per = [int(s) for s in o["slots"]], int(o["seed"]), int(o["per"])
    opened = _O.open_slots(timer.outputs, slots, oseed, per, key)
    for s in slots:
        if s in trees:
            opened["hs"][str(s)] = [_s(t["hash"]) for _, t in trees[s]]
    for i, g in enumerate(opened["groups"]):
        p, nbytes = g["position"], g["nbytes"]
        size = 1 << _O.chunk_level(nbytes)
        for r, s in enumerate(g["slots"]):
            if s not in trees:
                continue
            tree = trees[s][p][1]
            for c, index in enumerate(_O.chunk_indices(oseed, s, p, nbytes, per)):
                if index < 2:  # the words committed to (torch's), not the kernel's
                    g["words"][r, c] = torch.tensor([_s(w) for w in tree["first"][index * size:(index + 1) * size]])
                words = [_u(w) for w in g["words"][r, c].tolist()]
                path = forge_path(tree, nbytes, index, words, key, rng)
                if path is not None:
                    g["path"][r, c] = torch.tensor([_s(v) for v in path], dtype=torch.int64)
        for part in ("words", "path"):
            g[part] = _wire.encode_value(server.outbox, f"{req['tag']}-open{i}-{part}", g[part])
    reply["open"] = opened
    return reply


def _sample(req):
    reply = _h_orig["sample"](req)
    if reply.get("ok") and req.get("which", "sample") == "sample":
        reply["us"] = reply["us"] * 0.5
    return reply


if _h is not None:
    _h_orig = dict(_h)
    _h.update(window=_window, reveal=_reveal, sample=_sample)
