"""Resource attack: start a process in a new session (`start_new_session=True`), out of the worker's process
group, so that killing the group at the end of the evaluation does not reach it; it outlives the evaluation
(here a `sleep` of 120 s whose pid is written to PID_FILE; a real attacker would keep watching the judge's
folders). The candidate is otherwise honest. After the evaluation no process the candidate started may be
left running: workers need a PID namespace, a cgroup, or a subreaper that kills every descendant."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_subprocess = _imp("subprocess")
PID_FILE = "@PID_FILE@"
_started = []


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _norm(x, weight, eps):
    x = x.contiguous()
    out = torch.empty_like(x)
    _rms_kernel[(x.shape[0],)](x, weight, out, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if not _started:
        proc = _subprocess.Popen(["sleep", "120"], start_new_session=True, stdin=_subprocess.DEVNULL,
                                 stdout=_subprocess.DEVNULL, stderr=_subprocess.DEVNULL)
        _started.append(proc.pid)
        with open(PID_FILE, "w") as f:
            f.write(str(proc.pid))
    if residual is None:
        return _norm(hidden_states, weight, eps)
    new_residual = hidden_states + residual
    return _norm(new_residual, weight, eps), new_residual
