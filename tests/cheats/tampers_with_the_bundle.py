"""Cheat: at import, walk up to the worker's `load` request (frame locals) to learn the bundle's path, write
this very file over the bundle's baseline kernel, and kill the other workers of the same judge (the oracle and
the spare: same user, found by their command line and parent). The judge starts a new oracle for the next
evaluation, from the bundle it trusts, which now holds this module: imported as the oracle (`ks_baseline...`)
it computes the same wrong thing as the candidate (a plain copy of the input), so the next evaluation of this
module compares the wrong kernel with itself. It must be refused: the oracle must run the baseline the judge
read at the start (kept where no worker can write, or checked by hash before every oracle start)."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_os, _sys, _signal = _imp("os"), _imp("sys"), _imp("signal")


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _load_request():
    frame = _sys._getframe(0)
    while frame is not None:
        req = frame.f_locals.get("req")
        if isinstance(req, dict) and req.get("op") == "load":
            return req
        frame = frame.f_back
    return None


def _take_over():
    req = _load_request()
    if req is None or not req["package"].startswith("ks_candidate"):
        return
    target = _os.path.join(req["bundle"], "baseline", req["module"])
    with open(__file__) as mine, open(target) as theirs:
        source, current = mine.read(), theirs.read()
    if source == current:
        return  # already done: now behave, so that this evaluation goes through
    with open(target, "w") as f:
        f.write(source)
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
            _os.kill(int(pid), _signal.SIGKILL)


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
