"""Cheat (round 22), for a judge behind the uid wall: the baseline's own kernel (an honest copy: parity), a forged
claim (its worker divides its sample times by CLAIM), and helpers in sessions of their own that hop from process to
process faster than the judge's scans of /proc, so that they are neither stopped nor seen running while the oracle's
round of the judge's clock is measured.

Behind the uid wall a helper outside the worker's process group is found by its user: ``WorkerProcess.pause`` sends
SIGSTOP to every pid ``uid_processes`` lists (two passes over /proc, runners/isolation.py ``signal_user``) and
``still_running`` waits until a scan (runners/stopped.py ``running_threads``: the pids of one listing, each read after)
finds none of the user's threads running. A process that forks and at once exits, over and over, is a different pid
every few hundred microseconds: the pid a pass listed has exited by the time it is signalled or read, and its child was
born after the listing. A chain caught by a pass's SIGSTOP stays stopped (the second pass catches some more); of
CHAINS chains, some are missed by both passes, and the wait then ends at the first scan that misses them too, which is
most scans. (``Isolation.kill_leftovers`` knows this process: it kills with ``kill(-1, SIGKILL)`` sent as the user,
which reaches every process of the user at once, forks in flight included; the pause does not.)

The helpers are ``HOPPER``: one small interpreter each (``python -S``), started at import in a session of its own.
They hop only while the flag file in the worker's folder says so, from its window reply of round 1 (it goes first
there; the oracle's round follows) and its reveal of round 1 (the last request before round 2, where the oracle goes
first) to its next request, and burn the CPU between hops while their worker shows as stopped (the oracle's round).
Without the uid wall this is not needed (a helper in a session of its own is not stopped at all:
tests/test_judge_attacks_round3.py); on this machine the uid wall cannot be set up (the interpreter under /root is not
readable by other users), so tests/test_judge_attacks_round22.py runs ``HOPPER`` itself under another uid against
``WorkerProcess.pause`` and ``still_running``. Not run against a whole judge.

ARMED: "armed" starts the helpers; anything else leaves them out (the same forged claim alone)."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os, _subprocess = (_imp(m) for m in ("sys", "os", "subprocess"))

ARMED = "@ARMED@" == "armed"
CLAIM = float("@CLAIM@")  # the claimed speedup: its sample times are divided by it
CHAINS = int("@CHAINS@")  # helpers hopping at once

# argv: the worker's pid, the flag file. Only system calls and the modules an interpreter has at start.
HOPPER = r"""
import os, sys, time
worker, flag = int(sys.argv[1]), sys.argv[2]


def stopped():
    try:
        with open(f"/proc/{worker}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        os._exit(0)  # its worker is gone
    return state == b"T"


def armed():
    try:
        with open(flag, "rb") as f:
            return f.read(1) == b"1"
    except OSError:
        return False


while True:
    if not armed():
        stopped()  # (and gone with its worker)
        time.sleep(0.002)
        continue
    if os.fork():
        os._exit(0)  # the parent leaves: the pid a scan listed is gone before it is signalled or read
    if stopped():  # the oracle's round: a slice of work between hops
        t = time.perf_counter()
        while time.perf_counter() - t < 0.0002:
            pass
        _ = os.write(1, b".")
"""


def _server():
    frame = _sys._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("self")


_state = {"request": None, "counts": {}, "flag": None}
TRIGGERS = {("window", 2), ("reveal", 2)}  # the replies after which the oracle's round comes (rounds 1 and 2)


def _flag(value):
    with open(_state["flag"], "wb") as f:
        f.write(value)


def _install():
    server = _server()
    if server is None:
        return
    if ARMED:
        _state["flag"] = _os.path.join(_os.getcwd(), ".hop")
        _flag(b"0")
        for _ in range(CHAINS):
            _subprocess.Popen([_sys.executable, "-S", "-c", HOPPER, str(_os.getpid()), _state["flag"]],
                              start_new_session=True, stdin=_subprocess.DEVNULL, stdout=_subprocess.DEVNULL,
                              stderr=_subprocess.DEVNULL)
    channel = server.channel
    send, recv = channel.send, channel.recv

    def recv_and_note(*args, **kwargs):
        message = recv(*args, **kwargs)
        _state["request"] = message
        op, counts = message.get("op"), _state["counts"]
        if op == "prepare_timing" and message.get("which") == "window":
            counts.clear()
        counts[op] = counts.get(op, 0) + 1
        if _state["flag"]:
            _flag(b"0")  # its own requests: the helpers idle
        return message

    def send_forged(message):
        request = _state.get("request") or {}
        op = request.get("op")
        if op == "sample" and request.get("which", "sample") == "sample" and not request.get("reference") \
                and type(message.get("us")) is float:
            message["us"] = message["us"] / CLAIM
        if _state["flag"] and (op, _state["counts"].get(op, 0)) in TRIGGERS:
            _flag(b"1")  # the oracle's round comes next: hop through the judge's pause and scan, burn after
        send(message)

    channel.send, channel.recv = send_forged, recv_and_note


_install()


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
