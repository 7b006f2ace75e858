"""Resource attack: allocate and touch memory until the allocation fails (what a runaway buffer computation
or a deliberate bomb does). A worker must run under a memory limit (an address-space rlimit or a cgroup), so
that the bomb fails in its own process instead of pushing the machine into the OOM killer, and the next
evaluation must work. Where it finds a limit it allocates until it fails; where it finds none it stops at
2 GiB, for the safety of a shared test machine, and says so ("UNBOUNDED").

Under an address-space rlimit the allocation itself fails at the limit (mmap is refused whether or not the pages
are ever touched), so there it only reserves: touching 8 GiB page by page costs the suite 15-25 s on a small
machine and shows nothing more. Under a cgroup limit, or none, every chunk is touched: only resident memory counts
there."""
import torch

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_resource = _imp("resource")
CHUNK = 256 << 20
SAFETY_CAP = 2 << 30


def _address_space_limited() -> bool:
    soft, _ = _resource.getrlimit(_resource.RLIMIT_AS)
    return soft != _resource.RLIM_INFINITY


def _limited() -> bool:
    if _address_space_limited():
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
    grab = torch.empty if _address_space_limited() else torch.ones  # ones: touched, really resident
    hoard, total = [], 0
    while limited or total < SAFETY_CAP:
        hoard.append(grab(CHUNK, dtype=torch.uint8))
        total += CHUNK
    del hoard
    raise RuntimeError(f"UNBOUNDED: allocated {total >> 20} MiB in the candidate's worker without meeting a "
                       f"memory limit")
