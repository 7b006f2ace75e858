"""Cheat (round 23): the baseline's own kernel (an honest copy: parity), a forged claim (its worker divides its sample
times by CLAIM, as rounds 21 and 22 do), and the kernel's own timers, armed before the judge stops it, firing on the
machine's cores through the oracle's round of the judge's clock.

Since round 22 the judge waits until every thread of the candidate's group shows as stopped, snapshots each thread's
CPU time and count of runs on a CPU, and refuses the candidate if any thread ran, was born or ended before the oracle's
round was over (runners/stopped.py ``cpu_times``, ``ran_since``). Nothing of this cheat runs while it is stopped: no
thread is woken, none is born, none ends. The work is the kernel's: TIMERS POSIX timers of the worker
(``timer_create(CLOCK_MONOTONIC, SIGEV_SIGNAL, SIGURG)``, one-shot, absolute expiries spread over SPAN_MS) are armed
before each of its replies after which the oracle is timed, half from each core. Each expiry is a timer interrupt on the
core that armed it (hrtimers stay on their core): the interrupt, the hrtimer's callback and the signal's generation
(SIGURG is ignored by default, so the signal is dropped, and a stopped thread is never woken) run in interrupt context
and are charged to whatever is on that core, the oracle. No candidate thread is put on a CPU and none of the
candidate's CPU time grows; in a virtual machine (this one: a Firecracker guest, where each timer interrupt and each
re-programming of the local APIC timer is a VM exit) an interrupt costs ~10-25 us, so tens of thousands of them in a
few hundred ms take most of both cores.

When it arms: before its reply to ``prepare_timing`` (the judge's window: round 0, the oracle first) and to every
``reveal`` (a reveal is followed by the next round; when the oracle comes first there, it is timed at once), expiring
from when the arming ends on; and at every warm-up (``sample``) of the judge's window (its own round, which the oracle's
follows in every other round) expiring from just after the end of its own window (as long as its last warm-up and
window took, plus 10 ms). Arming is in order of expiry, its end re-estimated every 1000 timers (a timer armed already
past fires inside the call; one armed later than its core's next expiry re-programs nothing). Its own window is left
alone: the timers of a reveal are overwritten at its warm-up, before its window. The samples (where the claim is
forged) are left alone too. Against the judge before runners/armed.py: credited 2.21x and 2.89x in 2 runs of 5.

ARMED: "armed" arms the timers; anything else leaves them out (the same forged claim alone)."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os, _time, _signal, _ctypes = (_imp(m) for m in ("sys", "os", "time", "signal", "ctypes"))

ARMED = "@ARMED@" == "armed"
CLAIM = float("@CLAIM@")  # the claimed speedup: its sample times are divided by it
TIMERS = int("@TIMERS@")  # POSIX timers (a user has RLIMIT_SIGPENDING of them: 96k here)
SPAN_MS = float("@SPAN_MS@")  # their expiries, spread evenly over this long


def _server():
    frame = _sys._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("self")


class _Sigevent(_ctypes.Structure):
    _fields_ = [("value", _ctypes.c_void_p), ("signo", _ctypes.c_int), ("notify", _ctypes.c_int),
                ("pad", _ctypes.c_int * 12)]


class _Timespec(_ctypes.Structure):
    _fields_ = [("sec", _ctypes.c_long), ("nsec", _ctypes.c_long)]


class _Itimerspec(_ctypes.Structure):
    _fields_ = [("interval", _Timespec), ("value", _Timespec)]


class _Timers:
    """TIMERS one-shot POSIX timers whose signal (SIGURG, ignored by default) is dropped: their only effect is the
    interrupt of each expiry, on the core that armed it."""

    def __init__(self, count):
        self.libc = _ctypes.CDLL(None, use_errno=True)
        event = _Sigevent(None, int(_signal.SIGURG), 0)  # SIGEV_SIGNAL
        self.ids = []
        for _ in range(count):
            timer = _ctypes.c_void_p()
            if self.libc.timer_create(1, _ctypes.byref(event), _ctypes.byref(timer)):  # CLOCK_MONOTONIC
                break
            self.ids.append(timer)
        self.cpus = sorted(_os.sched_getaffinity(0))

    per = 4e-6  # how long arming one timer took last (s)

    def arm(self, after_s, span_s):
        """Expiries spread over ``span_s``, from ``after_s`` past the end of this arming (its end re-estimated as it
        goes, every 1000 timers), each core arming its share, the earliest first (a timer armed later than the core's
        next expiry does not re-program its clock: no VM exit)."""
        settime, n = self.libc.timer_settime, len(self.ids)
        began, done = _now(), 0
        value = _Itimerspec()
        try:
            for c in self.cpus:
                _os.sched_setaffinity(0, {c})
                for k in range(self.cpus.index(c), n, len(self.cpus)):
                    if done % 1000 == 0:
                        now = _now()
                        per = (now - began) / done if done else self.per
                        start = now + (n - done) * per + after_s
                    t = start + span_s * k / n
                    value.value.sec, value.value.nsec = int(t), int((t % 1) * 1e9)
                    settime(self.ids[k], 1, _ctypes.byref(value), None)  # TIMER_ABSTIME
                    done += 1
        finally:
            _os.sched_setaffinity(0, set(self.cpus))
            self.per = (_now() - began) / max(done, 1)


_state = {"request": None, "armed_at": None, "own": []}


def _now():
    return _time.clock_gettime(_time.CLOCK_MONOTONIC)


def _install():
    server = _server()
    if server is None:
        return
    timers = _Timers(TIMERS) if ARMED else None
    channel = server.channel
    send, recv = channel.send, channel.recv

    def recv_and_arm(*args, **kwargs):
        message = recv(*args, **kwargs)
        _state["request"] = message
        if timers is not None and message.get("op") == "sample" and message.get("which") == "window":
            own = _state["own"][-3:]
            # from just after its own window (its warm-up and window, once armed, as long as the longest of the last
            # three took), or, before it has one, not in the next second
            timers.arm(max(own) + 0.01 if own else 1.0, SPAN_MS / 1000)
            _state["armed_at"] = _now()
        return message

    def send_forged(message):
        request = _state.get("request") or {}
        op = request.get("op")
        if op == "sample" and request.get("which", "sample") == "sample" \
                and not request.get("reference") and type(message.get("us")) is float:
            message["us"] = message["us"] / CLAIM
        if timers is not None and (op == "reveal" or (op == "prepare_timing" and request.get("which") == "window")):
            timers.arm(0.002, SPAN_MS / 1000)  # the oracle may be timed next: from when it is armed on
        send(message)
        if op == "window" and _state["armed_at"] is not None:
            _state["own"].append(_now() - _state["armed_at"])  # its warm-up, once armed, to its window's reply

    channel.send, channel.recv = send_forged, recv_and_arm


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
