"""Cheat: the judge is kernelsmith's own process, of the same user, and dumpable: a candidate's worker (its
child) can open `/proc/<judge>/mem` for writing. This one overwrites, in every writable mapping of the judge,
the doubles 0.001 and 0.004 (the float16 atol and rtol of the example config) with 1e30, then returns the
unnormalised input from a Triton copy kernel of its own. It must be refused: the judge's memory must be out
of the candidate's reach (judge not dumpable, or workers under another user / in their own namespace), so the
tolerances stay what they were and the copy is 'out of tolerance'."""
import struct

import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_os, _re = _imp("os"), _imp("re")
_done = []


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _loosen_the_judge() -> int:
    patched = 0
    targets = [_re.escape(struct.pack("<d", v)) for v in (0.001, 0.004)]
    judge = _os.getppid()
    with open(f"/proc/{judge}/maps") as maps, open(f"/proc/{judge}/mem", "r+b", buffering=0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            lo, hi = (int(v, 16) for v in addr.split("-"))
            if not perms.startswith("rw") or hi - lo > 1 << 28:
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except OSError:
                continue
            for pattern in targets:
                for m in _re.finditer(pattern, data):
                    if m.start() % 8 == 0:
                        mem.seek(lo + m.start())
                        mem.write(struct.pack("<d", 1e30))
                        patched += 1
    return patched


def _copy(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if not _done:
        try:
            _done.append(_loosen_the_judge())
        except OSError:
            _done.append(-1)
    if residual is None:
        return _copy(hidden_states)
    new_residual = _copy(hidden_states + residual)
    return _copy(new_residual), new_residual
