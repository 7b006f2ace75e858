"""Cheat (round 31): a queue of pending signals walked in the timer's interrupt, from a process held in a ptrace stop
(a copy of the baseline with a forged claim).

A stop signal sent to a process flushes SIGCONT from its queues, and SIGCONT flushes the stop signals
(``prepare_signal``); where one is pending, ``flush_sigqueue_mask`` walks the whole queue, every queued real-time
signal. A process may queue as many as its user's ``RLIMIT_SIGPENDING`` (inherited from the judge: 96362 on this VM,
more on a host with more memory), blocked so they stay queued: one walk then takes 1-2 ms. A POSIX timer may send
SIGSTOP or SIGCONT, and its expiry sends it from the hrtimer interrupt, on the core that armed it. A plain stopped
process would be woken by SIGCONT (and ``stopped.ran_since`` would see it run), but a *traced* one is not
(``wake_up_state(t, __TASK_STOPPED)`` leaves a task in a ptrace stop where it is): the holder, a child of the worker,
asks to be traced (``PTRACE_TRACEME``) and stops itself, a signal-delivery stop ('t', which the judge counts as
stopped). Its timers, alternately SIGCONT and SIGSTOP, each find the other pending, and each expiry walks the queue.
16 timers (``armed.MAX_TIMERS``), two processes and three threads: ``armed.could_slow`` reads nothing past its
bounds, ``stopped.ran_since`` nothing (the holder is never put on a CPU), ``interrupts.storm`` 16 interrupts. None of
``ptrace``, ``timer_create``, ``kill`` or ``rt_sigprocmask`` is refused by the seccomp filter.

Between the oracle's windows the worker (the tracer) lets the holder run (``PTRACE_CONT``), suppressing the stops it
meets, the holder re-arms its timers at the times the worker sends, and stops itself again. When: round 29's timing
(the oracle's window predicted from round 0's gap; where the oracle goes first, SHIFT of its own windows later), the
expiries spread over it, armed from each core in turn; never armed inside its own timed window. Its
samples' times are divided by CLAIM.

QUEUED: real-time signals queued on the holder (0: the same timers and forged claim, nothing to walk)."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os, _time, _signal, _ctypes, _select, _subprocess = (
    _imp(m) for m in ("sys", "os", "time", "signal", "ctypes", "select", "subprocess"))

CLAIM = float("@CLAIM@")
QUEUED = int("@QUEUED@")
TIMERS = int("@TIMERS@")
LAG = float("@LAG@")  # the last expiry this long before the oracle's window is expected to end (s)
SPAN = float("@SPAN@")  # the expiries spread over this many of its own windows before that
SCALE = float("@SCALE@")  # the judge's scan of every thread after the oracle's window, against this process's own
SHIFT = float("@SHIFT@")  # where the oracle goes first, its window taken this many of its own windows later and the
# expiries spread over twice that more (the judge's look at its reveal before, measured once, is noisy: 5-57 ms here)


def _server():
    frame = _sys._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("self")


class _Timespec(_ctypes.Structure):
    _fields_ = [("sec", _ctypes.c_long), ("nsec", _ctypes.c_long)]


class _Itimerspec(_ctypes.Structure):
    _fields_ = [("interval", _Timespec), ("value", _Timespec)]


class _Timeval(_ctypes.Structure):
    _fields_ = [("sec", _ctypes.c_long), ("usec", _ctypes.c_long)]


class _Itimerval(_ctypes.Structure):
    _fields_ = [("interval", _Timeval), ("value", _Timeval)]


class _Sigevent(_ctypes.Structure):
    _fields_ = [("value", _ctypes.c_long), ("signo", _ctypes.c_int), ("notify", _ctypes.c_int),
                ("pad", _ctypes.c_char * 48)]



# the holder: blocks its signals, queues QUEUED real-time ones on itself, makes TIMERS POSIX timers (SIGCONT and
# SIGSTOP in turn), asks to be traced and stops itself; on each line "first last" it arms them and stops again
_HOLDER = r"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
class TS(ctypes.Structure): _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]
class ITS(ctypes.Structure): _fields_ = [("interval", TS), ("value", TS)]
class SEV(ctypes.Structure):
    _fields_ = [("value", ctypes.c_long), ("signo", ctypes.c_int), ("notify", ctypes.c_int), ("pad", ctypes.c_char * 48)]
queued, timers = int(sys.argv[1]), int(sys.argv[2])
rt = signal.SIGRTMIN + 2
signal.pthread_sigmask(signal.SIG_BLOCK, {rt, signal.SIGCONT})
made = 0
for _ in range(queued):
    try:
        os.kill(os.getpid(), rt)
        made += 1
    except OSError:
        break
ids = []
for k in range(timers):
    t = ctypes.c_void_p()
    if libc.timer_create(1, ctypes.byref(SEV(0, signal.SIGCONT if k % 2 == 0 else signal.SIGSTOP, 0)), ctypes.byref(t)):
        break
    ids.append(t)
traced = libc.syscall(101, 0, 0, 0, 0) == 0  # PTRACE_TRACEME
os.write(1, b"ready %d %d %d\n" % (made, len(ids), traced))
os.kill(os.getpid(), signal.SIGSTOP)
cpus = sorted(os.sched_getaffinity(0))
for line in sys.stdin:
    first, last = (float(x) for x in line.split())
    for c, cpu in enumerate(cpus):  # every other timer armed from each core (one move a core)
        os.sched_setaffinity(0, {cpu})
        for k in range(c, len(ids), len(cpus)):
            at = first + (last - first) * k / max(1, len(ids) - 1)
            libc.timer_settime(ids[k], 1, ctypes.byref(ITS(TS(0, 0), TS(int(at), int((at % 1) * 1e9)))), None)
    os.sched_setaffinity(0, set(cpus))
    os.write(1, b"ok\n")
    os.kill(os.getpid(), signal.SIGSTOP)
"""


class _Walk:
    """The holder, traced by this worker's thread (its parent) and held in a ptrace stop between arms."""

    def __init__(self):
        self.libc = _ctypes.CDLL(None, use_errno=True)
        self.proc = _subprocess.Popen([_sys.executable, "-c", _HOLDER, str(QUEUED), str(TIMERS)],
                                      stdin=_subprocess.PIPE, stdout=_subprocess.PIPE, bufsize=0)
        self.out = self.proc.stdout
        self.ready = self.out.readline().split()
        self.traced = self.ready[-1:] == [b"1"]  # where ptrace is refused, a plain stop, which SIGCONT would end
        _os.waitpid(self.proc.pid, 0 if self.traced else _os.WUNTRACED)  # its own SIGSTOP: a signal-delivery stop
        self.scan = 0.0

    def arm(self, first, last):
        """The holder let run (every stop it meets on the way suppressed) until it has armed its timers from ``first``
        to ``last`` (monotonic seconds) and stopped itself again."""
        pid = self.proc.pid
        if not self.traced:
            return
        self.libc.syscall(101, 7, pid, 0, 0)  # PTRACE_CONT, no signal
        self.proc.stdin.write(b"%.6f %.6f\n" % (first, last))
        armed = False
        while True:
            _, status = _os.waitpid(pid, 0)
            if not _os.WIFSTOPPED(status):
                return
            armed = armed or bool(_select.select([self.out], [], [], 0)[0] and self.out.readline())
            if armed:
                return  # held in a ptrace stop until the next arm
            self.libc.syscall(101, 7, pid, 0, 0)


def _now():
    return _time.clock_gettime(_time.CLOCK_MONOTONIC)


_state = {"request": None, "windows": 0, "replied": None, "gap": None, "window": None, "armed": 0, "last": None,
          "after_reveal": 0.0, "arm_s": 0.01}


def _install():
    server = _server()
    if server is None:
        return
    fan = None  # made when the judge's clock is prepared
    channel = server.channel
    send, recv = channel.send, channel.recv

    def recv_and_note(*args, **kwargs):
        nonlocal fan
        message = recv(*args, **kwargs)
        now = _now()
        _state["request"], _state["received"] = message, now
        op = message.get("op")
        if op == "prepare_timing" and message.get("which") == "window":
            if fan is None:
                fan = _Walk()
            _state["windows"], _state["gap"] = 0, None
        if op == "refill" and _state["windows"] == 0 and _state["replied"] is not None:
            _state["gap"] = now - _state["replied"]  # round 0, the oracle first: its stop, refill, warm-up and window
        if op == "refill" and _state["windows"] == 1 and _state["last"] == "reveal":
            _state["after_reveal"] = now - _state["replied"]  # round 1, itself first: the judge's checks of a reveal
        return message

    def send_forged(message):
        request = _state.get("request") or {}
        op = request.get("op")
        if op == "sample" and request.get("which", "sample") == "sample" \
                and not request.get("reference") and type(message.get("us")) is float:
            message["us"] = message["us"] / CLAIM
        if op == "window":
            _state["window"] = _now() - _state["received"]
        ready = fan is not None and _state["gap"] is not None and _state["window"] is not None
        # itself first (an odd round): armed at its own warm-up's reply, untimed, for after its own window; the oracle
        # first (an even round): at the reveal before it. Arming lets the holder run, so never inside a timed window
        odd_warm = op == "sample" and request.get("which") == "window" and _state["windows"] % 2 == 1
        after_odd = op == "reveal" and _state["windows"] % 2 == 0 and _state["windows"]
        if ready and (odd_warm or after_odd):  # the oracle goes next: its window ends about ``gap`` from then
            t0 = _now()
            end = (t0 + _state["arm_s"] + _state["gap"] - LAG - SCALE * fan.scan
                   + (_state["after_reveal"] + SHIFT * _state["window"] if after_odd else _state["window"]))
            fan.arm(end - (SPAN + 2 * SHIFT if after_odd else SPAN) * _state["window"], end)  # wider where less sure
            _state["arm_s"], _state["armed"] = _now() - t0, _state["armed"] + 1
        _state["replied"], _state["last"] = _now(), op
        send(message)
        if op == "window":
            _state["windows"] += 1

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
