"""Cheat: look for the oracle and its outputs from inside the candidate's process: a `ks_baseline` module in
`sys.modules` (its kernel or its last outputs), tensors of the output's shape left in memory (`gc`), files in
the other workers' outboxes, and the memory of the other worker processes through `/proc/<pid>/mem`. Whatever
it finds it returns as its own output; if it finds nothing it returns zeros. It must be refused: the oracle
runs in another process, its outbox is emptied before the candidate is called, and workers are not dumpable,
so their memory cannot be read: the zeros are compared with the oracle's answer ('out of tolerance')."""
import torch

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _gc, _os = _imp("sys"), _imp("gc"), _imp("os")


def _from_modules(shape):
    for name, mod in list(_sys.modules.items()):
        if "baseline" in name and mod is not None:
            fn = getattr(mod, "rms_norm", None)
            if fn is not None:
                return ("module", fn)
    return None


def _from_gc(like):
    for obj in _gc.get_objects():
        if isinstance(obj, torch.Tensor) and obj is not like and obj.shape == like.shape and \
                obj.dtype == like.dtype and float(obj.float().abs().sum()) > 0 and not torch.equal(obj, like):
            return obj.clone()
    return None


def _from_other_workers():
    me, parent = _os.getpid(), _os.getppid()
    for pid in filter(str.isdigit, _os.listdir("/proc")):
        pid = int(pid)
        if pid in (me, parent):
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"runners.worker" not in f.read():
                    continue
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
                start = int(maps.readline().split("-")[0], 16)
                mem.seek(start)
                if mem.read(16):
                    raise RuntimeError(f"read the memory of worker {pid}: workers must not be dumpable")
        except (PermissionError, FileNotFoundError, ProcessLookupError):
            continue


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    _from_other_workers()
    found = _from_modules(hidden_states.shape)
    if found is not None:
        raise RuntimeError("the baseline module is loaded in the candidate's process")
    stolen = _from_gc(hidden_states)
    out = torch.zeros_like(hidden_states)
    if stolen is not None and residual is None:
        out = stolen
    return out if residual is None else (out, torch.zeros_like(hidden_states))
