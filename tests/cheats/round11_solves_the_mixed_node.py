"""Cheat (round 11): the MIXED node solved for its left word, so that skipped slots pass the openings again.

(Against the openings' first form, with worker-chosen paths; since this round the digest covers every output's
chunk-level nodes and no path is taken. The solvers are kept for tests/test_judge_attacks_round11.py: the node is
still solvable, which is why nothing above a chunk rests on it.)

The node since round 10 (runners/commitments.py ``_compress``): ``v = rot32(a + alpha*b) * (2b + 1) + a``, then
``G(v) = xs32(xs32(v) * MIX)`` and ``G(v) + a + b``. Every operation in it acts on the two 32-bit halves of its words
as a T-FUNCTION (bit i of a result's low half and bit i of its high half depend only on bits 0..i of the inputs'
halves: additions, subtractions, products modulo 2**32, xors, and the swaps and shifts by exactly 32) EXCEPT two
32-bit carry words, each the high half of a 32x32 product:

* ``H1 = hi32(zh * ml + zl + dl)`` in ``rot32(z) * m`` (``z = a + alpha*b``, ``m = 2b + 1``, ``d = -alpha*b``): at
  most ``ml + 1``, so one of three values where the right word's ``ml`` (low half of ``2b + 1``) is 1, i.e. ``b``'s
  low half is 0 or 2**31;
* ``H2 = hi32(X * MIX_lo)`` in ``xs32(v) * MIX`` (``X`` the low half of ``xs32(v)``): a function of X's TOP bits,
  and additive over its 16-bit halves: ``hi32((Xt 2**16 + Xlo) MIX_lo) = K(Xt) + hi32(Xlo MIX_lo) + {0, 1}``.

So (``solve_left``), for a ``b`` with ``ml = 1``: guess ``H1`` (3 values) and the borrow of ``c - z`` (2); for each of
the 2**16 low halves of ``zh``, bits 0-15 of ``zl`` follow one by one from ``yl == wl ^ wh`` (the low half of the
equation ``xs32(v) * MIX == xs32(c - z)``, where ``zl``'s bit enters with coefficient 1), and ``yh == wh`` then GIVES
``H2 mod 2**16``; a table of ``K(Xt)`` over the 2**16 top halves of X meets it (about one X each), and with X and H2
known, bits 16-31 of ``zh`` and ``zl`` follow, nearly all candidates dying within a few levels. About 6 * 2**17
word steps: a third of a second in numpy, every solution found (one exists about 6 times in 10, as for a random
function; else another sibling below is drawn).

The right word at a forged path's top right turn is the chunk's climbed ancestor: it is given ``ml = 1`` by the free
sibling one level below, with the same meet in the middle on a 32-bit target (``partial_left`` where that sibling is
the left word: ``zh`` fixed, so ``H1`` is one of three values; ``partial_right`` where it is the right one: its low
half fixed to 0 or 2**31). One forged chunk: about a second on one core. Everything else is round 10's forger
(tests/cheats/round10_forges_opening_paths.py): chunks 0 and 1 computed in time, a fake spine committed to, the
skipped slots computed after the clock, every opened chunk sent up to the spine. Outside the judge's worker
(imported by a test, no ``serve`` frame) only the kernel and the forging functions are defined. The kernel itself is
the baseline's.
"""
import random

import numpy as np
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
    """runners/commitments.py ``_compress`` on unsigned Python ints (the mixed form of round 10)."""
    a, b, alpha = _u(a), _u(b), _u(alpha)
    v = (_rot((a + alpha * b) & _M) * (2 * b + 1) + a) & _M
    v ^= v >> 32
    v = (v * _C.MIX) & _M
    v ^= v >> 32
    return (v + a + b) & _M


def k(key: int, salt: int, odd: bool = False) -> int:
    return _u(_C._constant(key, salt) | int(odd))


# ---- the solver: T-functions on the halves, a meet in the middle on the one carry word left ---------------------
M32 = (1 << 32) - 1
_ML, _MH = _C.MIX & M32, _C.MIX >> 32  # MIX's halves
_U = np.uint32
_SIXTEEN = 1 << 16
_XT = np.arange(_SIXTEEN, dtype=np.uint64)
_KEY = ((_XT * np.uint64(_ML)) >> np.uint64(16)) & np.uint64(0xFFFF)
_ORDER = np.argsort(_KEY, kind="stable")
_SORTED = _KEY[_ORDER]


def _match(xlo, g2):
    """Every X = Xt * 2**16 + xlo with hi32(X * MIX_lo) = g2 (mod 2**16): (row index, X, hi32(X * MIX_lo))."""
    b1 = ((xlo.astype(np.uint64) * np.uint64(_ML)) >> np.uint64(32)).astype(np.int64)
    rows, xts = [], []
    for eps in (0, 1):
        want = (g2.astype(np.int64) - b1 - eps) & 0xFFFF
        lo, hi = np.searchsorted(_SORTED, want, "left"), np.searchsorted(_SORTED, want, "right")
        count = hi - lo
        for n in range(int(count.max()) if count.size else 0):
            sel = np.nonzero(count > n)[0]
            rows.append(sel)
            xts.append(_ORDER[lo[sel] + n])
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, _U), np.zeros(0, _U)
    rows = np.concatenate(rows)
    x = (np.concatenate(xts).astype(np.uint64) << np.uint64(16)) | xlo[rows].astype(np.uint64)
    h2 = (x * np.uint64(_ML)) >> np.uint64(32)
    ok = (h2 & np.uint64(0xFFFF)) == g2[rows].astype(np.uint64)
    return rows[ok], x[ok].astype(_U), h2[ok].astype(_U)


def _split(v):
    return v & M32, v >> 32


def solve_left(b, parent, alpha):
    """Every a with comp(a, b, alpha) == parent, for b whose (2b+1) has low half 1 (b's low half 0 or 2**31)."""
    b, parent, alpha = b & _M, parent & _M, alpha & _M
    ml, mh = _split((2 * b + 1) & _M)
    if ml != 1:
        raise ValueError("b's low half must be 0 or 2**31")
    dl, dh = _split((-alpha * b) & _M)
    cl, ch = _split((parent + alpha * b - b) & _M)
    mh_, dl_, dh_, cl_, ch_ = (_U(x) for x in (mh, dl, dh, cl, ch))
    found = []
    with np.errstate(over="ignore"):
        def parts(zl, zh, e, beta):
            vl = zh + zl + dl_
            vh = zh * mh_ + zl + zh + dh_ + e
            return vl, vh, vl ^ vh, cl_ - zl, ch_ - zh - beta
        for e in (0, 1, 2):
            for beta in (0, 1):
                e_, beta_ = _U(e), _U(beta)
                zh = np.arange(_SIXTEEN, dtype=_U)
                zl = np.zeros_like(zh)
                for i in range(16):  # zl's bit i is fixed by bit i of yl == wl ^ wh
                    _, _, x, wl, wh = parts(zl, zh, e_, beta_)
                    zl |= ((x * _U(_ML)) ^ wl ^ wh) & _U(1 << i)
                _, vh, x, _, wh = parts(zl, zh, e_, beta_)
                g2 = (wh - vh * _U(_ML) - x * _U(_MH)) & _U(0xFFFF)  # yh == wh: hi32(X * MIX_lo), low 16 bits
                rows, xf, h2 = _match(x & _U(0xFFFF), g2)
                zh, zl = zh[rows], zl[rows]
                for i in range(16, 32):
                    bit = _U(1 << i)
                    zh, zl, xf, h2 = (np.concatenate([zh, zh | bit]), np.concatenate([zl, zl]),
                                      np.concatenate([xf, xf]), np.concatenate([h2, h2]))
                    _, _, x, wl, wh = parts(zl, zh, e_, beta_)
                    zl = zl | (((x * _U(_ML)) ^ wl ^ wh) & bit)
                    _, vh, x, _, wh = parts(zl, zh, e_, beta_)
                    keep = (((vh * _U(_ML) + x * _U(_MH) + h2 - wh) | (x ^ xf)) & bit) == 0
                    zh, zl, xf, h2 = zh[keep], zl[keep], xf[keep], h2[keep]
                for lo, hi in zip(zl.tolist(), zh.tolist()):
                    a = (((hi << 32) | lo) - alpha * b) & _M
                    if comp(a, b, alpha) == parent and a not in found:
                        found.append(a)
    return found


def _top_partial(cands, build, target):
    """Bits 16-31 of the unknown half for partial solves: keep those whose X matches and output low half is target."""
    u, xf, h2, e = cands
    for i in range(16, 32):
        bit = _U(1 << i)
        u, xf, h2, e = (np.concatenate([u, u | bit]), np.concatenate([xf, xf]), np.concatenate([h2, h2]),
                        np.concatenate([e, e]))
        vh, x, rest = build(u, e)
        yl = x * _U(_ML)
        yh = vh * _U(_ML) + x * _U(_MH) + h2
        keep = ((((yl ^ yh) + rest - _U(target)) | (x ^ xf)) & bit) == 0
        u, xf, h2, e = u[keep], xf[keep], h2[keep], e[keep]
    return u


def _partial(build, es, target):
    """Common MITM: ``build(u, e)`` -> (vh, X, rest) with output low half = (yl ^ yh) + rest, all T-functions of u."""
    with np.errstate(over="ignore"):
        u = np.tile(np.arange(_SIXTEEN, dtype=_U), len(es))
        e = np.repeat(np.array(es, dtype=_U), _SIXTEEN)
        vh, x, rest = build(u, e)
        yl = x * _U(_ML)
        yh = (_U(target) - rest) ^ yl
        g2 = (yh - vh * _U(_ML) - x * _U(_MH)) & _U(0xFFFF)
        rows, xf, h2 = _match(x & _U(0xFFFF), g2)
        return _top_partial((u[rows], xf, h2, e[rows]), build, target).tolist()


def partial_left(b, target, alpha, zh):
    """a with (comp(a, b, alpha) & 0xFFFFFFFF) == target and the high half of a + alpha*b equal to zh."""
    b, alpha = b & _M, alpha & _M
    ml, mh = _split((2 * b + 1) & _M)
    dl, dh = _split((-alpha * b) & _M)
    bl = b & M32
    q = (zh * ml) >> 32
    zh_, ml_, mh_, dl_, dh_ = (_U(x) for x in (zh, ml, mh, dl, dh))
    def build(zl, e):
        vl = zh_ * ml_ + zl + dl_
        vh = zh_ * mh_ + zl * ml_ + zh_ + dh_ + e
        return vh, vl ^ vh, zl + dl_ + _U(bl)
    out = []
    for zl in _partial(build, [(q + k) & M32 for k in range(3)], target):
        a = (((zh << 32) | zl) - alpha * b) & _M
        if comp(a, b, alpha) & M32 == target:
            out.append(a)
    return out


def partial_right(a, target, alpha, bl=0):
    """b with low half bl and (comp(a, b, alpha) & 0xFFFFFFFF) == target (bl 0: (2b+1) has low half 1)."""
    a, alpha = a & _M, alpha & _M
    al, ah = _split(a)
    ul, u0h = _split((a + alpha * bl) & _M)
    ml = (2 * bl + 1) & M32
    carry = bl >> 31
    al_, ah_, ul_, u0h_, ml_, aL = (_U(x) for x in (al, ah, ul, u0h, ml, alpha & M32))
    def build(bh, e):
        uh = u0h_ + aL * bh
        mh = _U(2) * bh + _U(carry)
        vl = uh * ml_ + al_
        vh = uh * mh + ul_ * ml_ + ah_ + e
        return vh, vl ^ vh, al_ + _U(bl)
    out = []
    for bh in _partial(build, list(range(ml + 1)), target):
        b = (bh << 32) | bl
        if comp(a, b, alpha) & M32 == target:
            out.append(b)
    return out


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


def forge_path(tree: dict, nbytes: int, index: int, words: list, key: int, rng: random.Random, tries: int = 24):
    """Siblings that take chunk ``index`` (its true ``words``) up to the fake tree's hash; None if none was found.
    Random siblings up to two levels below the top right turn, the one just below it solved so that the climbed node
    has low half 0 or 2**31, the one at the turn solved (``solve_left``), the spine's above."""
    j, widths = tree["j"], _O.widths(nbytes)
    depth = len(widths) - 1 - j
    spine, sib = tree["spine"], tree["sib"]
    if index < 2:
        return [spine[j] if index == 1 and d == 0 else sib[j + d] for d in range(depth)]
    top = index.bit_length() - 1  # the highest level (above j) at which the ancestor is a right child
    x0 = climb_words(words, key)
    for _ in range(tries):
        x, node, path = x0, index, []
        for d in range(top - 1):
            s = 0 if (node ^ 1) >= widths[j + d] else rng.getrandbits(64)
            alpha = k(key, j + d, True)
            x = comp(x, s, alpha) if node % 2 == 0 else comp(s, x, alpha)
            path.append(s)
            node //= 2
        if (node ^ 1) >= widths[j + top - 1]:
            return None  # no free sibling just below the turn (a padded level): not forged here
        alpha = k(key, j + top - 1, True)
        target = rng.choice((0, 1 << 31))
        if node % 2:  # the ancestor is the right word: the free left sibling sets the parent's low half
            below = [(s, comp(s, x, alpha)) for s in partial_left(x, target, alpha, rng.getrandbits(32))]
        else:
            below = [(s, comp(x, s, alpha)) for s in partial_right(x, target, alpha, rng.choice((0, 1 << 31)))]
        for s, up in below:
            for a in solve_left(up, spine[j + top + 1], k(key, j + top, True)):
                return path + [s, a] + [sib[j + d] for d in range(top + 1, depth)]
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
