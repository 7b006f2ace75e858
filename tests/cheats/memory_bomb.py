"""Resource attack: allocate and touch memory until the allocation fails (what a runaway buffer computation
or a deliberate bomb does). A worker must run under a memory limit (an address-space rlimit or a cgroup), so
that the bomb fails in its own process instead of pushing the machine into the OOM killer, and the next
evaluation must work. Where it finds a limit it allocates until it fails; where it finds none it stops at
2 GiB, for the safety of a shared test machine, and says so ("UNBOUNDED")."""
import torch

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_resource = _imp("resource")
CHUNK = 256 << 20
SAFETY_CAP = 2 << 30


def _limited() -> bool:
    soft, _ = _resource.getrlimit(_resource.RLIMIT_AS)
    if soft != _resource.RLIM_INFINITY:
        return True
    try:
        with open("/proc/self/cgroup") as f:
            group = f.read().strip().split("::")[-1]
        with open(f"/sys/fs/cgroup{group}/memory.max") as f:
            return f.read().strip() != "max"
    except (OSError, IndexError):
        return False


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    limited = _limited()
    hoard, total = [], 0
    while limited or total < SAFETY_CAP:
        hoard.append(torch.ones(CHUNK, dtype=torch.uint8))  # touched: really resident
        total += CHUNK
    del hoard
    raise RuntimeError(f"UNBOUNDED: allocated {total >> 20} MiB in the candidate's worker without meeting a "
                       f"memory limit")
