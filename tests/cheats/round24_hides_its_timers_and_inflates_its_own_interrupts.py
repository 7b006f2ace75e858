"""Cheat (round 24): round 23's timer flood through the oracle's rounds (a copy of the baseline with a forged claim,
tens of thousands of one-shot timers expiring while the oracle is timed, each an interrupt charged to it), past both
defences the judge has had since:

1. **runners/armed.py** counts a stopped candidate's armed timerfds among ``/proc/PID/fd``: the file table of the
   process's *first thread*. A thread that calls ``unshare(CLONE_FILES)`` gets a table of its own (a thread may; so may a
   thread made by ``clone`` without CLONE_FILES), and what it opens there is listed only under
   ``/proc/PID/task/TID/fd``. Here one such thread of the worker holds TIMERS timerfds (its RLIMIT_NOFILE), and arms them
   when the worker tells it (a pipe), a batch from each core in turn: ``held_timers`` reads 0 armed timerfds. (A
   process whose first thread has exited shows no table at all under /proc/PID/fd: the same, behind a zombie leader.)

2. **runners/interrupts.py** ``storm`` credits no speedup where the oracle's rounds saw more than 5 interrupts a ms
   plus twice the candidate's, counted machine-wide (``/proc/stat``'s ``intr`` total, every core). The candidate's
   own rounds are its own to make noisy: the worker pins its thread to one core, and while its own window is timed a
   helper process of its group, pinned to another core (idle then: the judge and the oracle wait on their pipes),
   sleeps 1 us at a time with a timer slack of 1 ns: about 40 timer interrupts a ms on this VM, on a core where the
   candidate's work is not. The oracle's flood (about 60 a ms, spread over both cores) is then under 5 + 2 x 40.

When it arms: the judge's rounds alternate, the oracle first in rounds 0, 2, 4, ... (the worker counts its own windows
since ``prepare_timing``); round 0 is not counted. In an odd round, at its own window's warm-up, for just after its
window (the oracle follows: two thirds of the timers over SPAN_MS / 2, over before the reveals); after an odd round, at
its reply to ``reveal`` (the oracle goes next: all of them over SPAN_MS from 2 ms on), and what is left of that flood
is put off at its own warm-up of the next round. Its samples' times are divided by CLAIM.

HIDE: "thread" holds the timers in a thread with a file table of its own; "flight" in flight in a unix socket (round
23's A', which no listing shows either: the inflation alone, whatever armed.py lists); "table" in the worker's own table
(what armed.py sees); anything else: no timers. INFLATE: "yes" runs the helper during its own windows."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os, _time, _ctypes, _resource, _threading, _subprocess, _socket, _array = (
    _imp(m) for m in ("sys", "os", "time", "ctypes", "resource", "threading", "subprocess", "socket", "array"))

HIDE = "@HIDE@"
INFLATE = "@INFLATE@" == "yes"
CLAIM = float("@CLAIM@")  # the claimed speedup: its sample times are divided by it
TIMERS = int("@TIMERS@")  # timerfds (a process may hold RLIMIT_NOFILE of them: 20k here)
SPAN_MS = float("@SPAN_MS@")  # their expiries, spread evenly over this long
CLONE_FILES = 0x400


def _server():
    frame = _sys._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("self")


class _Timespec(_ctypes.Structure):
    _fields_ = [("sec", _ctypes.c_long), ("nsec", _ctypes.c_long)]


class _Itimerspec(_ctypes.Structure):
    _fields_ = [("interval", _Timespec), ("value", _Timespec)]


def _now():
    return _time.clock_gettime(_time.CLOCK_MONOTONIC)


class _Timers:
    """TIMERS one-shot timerfds, made and armed by one thread of the worker; ``hide`` "thread": that thread first takes
    a file table of its own (``unshare(CLONE_FILES)``), so that /proc/PID/fd (the first thread's table) lists none of
    them; "flight": they are posted 250 a message into a datagram socket pair and closed (round 23's A': in no table at
    all), taken out to be armed and posted again. The worker asks for an arming through a pipe and waits for it."""

    BATCH = 250

    def __init__(self, count, hide):
        self.libc = _ctypes.CDLL(None, use_errno=True)
        try:
            soft, hard = _resource.getrlimit(_resource.RLIMIT_NOFILE)
            _resource.setrlimit(_resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError):
            pass
        self.cpus = sorted(_os.sched_getaffinity(0))
        self.cmd_r, self.cmd_w = _os.pipe()
        self.ack_r, self.ack_w = _os.pipe()
        self.args, self.fds, self.per = None, [], 3e-6
        self.hide, self.batches = hide, 0
        _threading.Thread(target=self._run, args=(count,), daemon=True).start()
        _os.read(self.ack_r, 1)

    def _run(self, count):
        if self.hide == "thread":
            self.libc.unshare(CLONE_FILES)  # from here on this thread's files are its own
        fds = [self.libc.timerfd_create(1, 0o2004000) for _ in range(count)]  # MONOTONIC, NONBLOCK | CLOEXEC
        self.fds = [fd for fd in fds if fd >= 0]
        if self.hide == "flight":
            self.keep, self.post = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_DGRAM)
            for i in range(0, len(self.fds), self.BATCH):
                self._post(self.fds[i:i + self.BATCH])
        _os.write(self.ack_w, b"m")
        while True:
            _os.read(self.cmd_r, 1)
            try:
                self._arm(*self.args)
            finally:
                _os.write(self.ack_w, b"a")

    def _arm(self, after_s, span_s, share):
        """``share`` of the timers, their expiries spread over ``span_s`` from ``after_s`` past the end of this arming
        (three times its fastest arming, 40 ms at least: an arming that runs late beside expiries runs later still), a
        batch from each core in turn (an hrtimer fires on the core that armed it); the rest set seconds later (re-armed
        before then)."""
        n, value, began = max(len(self.fds), 1), _Itimerspec(), _now()
        used = max(1, int(n * share))
        start = began + max(3 * n * self.per, 0.04) + after_s
        try:
            for b, i in enumerate(range(0, len(self.fds), self.BATCH)):
                _os.sched_setaffinity(0, {self.cpus[b % len(self.cpus)]})
                fds = self._take() if self.hide == "flight" else self.fds[i:i + self.BATCH]
                soon = _now() + 0.001
                for k, fd in enumerate(fds, i):
                    t = max(start + span_s * k / used, soon) if k < used else start + 5.0
                    value.value.sec, value.value.nsec = int(t), int((t % 1) * 1e9)
                    self.libc.timerfd_settime(fd, 1, _ctypes.byref(value), None)  # TFD_TIMER_ABSTIME
                if self.hide == "flight":
                    self._post(fds)
        finally:
            _os.sched_setaffinity(0, set(self.cpus))
            self.per = min(self.per, (_now() - began) / n)

    def _post(self, fds):
        try:
            self.post.sendmsg([b"t"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _array.array("i", fds))])
        finally:
            for fd in fds:
                _os.close(fd)

    def _take(self):
        _, anc, _, _ = self.keep.recvmsg(1, _socket.CMSG_SPACE(4 * self.BATCH))
        fds = _array.array("i")
        for level, kind, data in anc:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - len(data) % 4])
        return list(fds)

    def arm(self, after_s, span_s, share=1.0):
        self.args = (after_s, span_s, share)
        _os.write(self.cmd_w, b"g")
        _os.read(self.ack_r, 1)


_INFLATER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None)
libc.prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK: 1 ns
os.sched_setaffinity(0, {int(sys.argv[1])})


class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


nap = ctypes.byref(Timespec(0, 1000))
while True:
    if os.read(0, 1) != b"g":
        continue
    os.set_blocking(0, False)
    while True:
        libc.clock_nanosleep(1, 0, nap, None)  # each one a timer interrupt on this core
        try:
            if os.read(0, 1) == b"s":
                break
        except BlockingIOError:
            pass
    os.set_blocking(0, True)
"""


class _Inflater:
    """A helper process of the worker's group, pinned to a core the worker's thread does not use, that takes about 40
    timer interrupts a ms there while the worker's own window is timed, and waits on its pipe otherwise."""

    def __init__(self):
        cpus = sorted(_os.sched_getaffinity(0))
        _os.sched_setaffinity(0, {cpus[0]})  # the worker's thread (torch runs one here)
        self.proc = _subprocess.Popen([_sys.executable, "-c", _INFLATER, str(cpus[-1])], stdin=_subprocess.PIPE)

    def go(self):
        self.proc.stdin.write(b"g")
        self.proc.stdin.flush()

    def stop(self):
        self.proc.stdin.write(b"s")
        self.proc.stdin.flush()


_state = {"request": None, "windows": 0}


def _install():
    server = _server()
    if server is None:
        return
    timers = _Timers(TIMERS, HIDE) if HIDE in ("thread", "flight", "table") else None
    inflater = _Inflater() if INFLATE else None
    channel = server.channel
    send, recv = channel.send, channel.recv
    own = []  # its own warm-ups and windows (s)

    def recv_and_arm(*args, **kwargs):
        message = recv(*args, **kwargs)
        _state["request"] = message
        op = message.get("op")
        if op == "prepare_timing" and message.get("which") == "window":
            _state["windows"] = 0  # the judge's rounds alternate: the oracle first in its rounds 0, 2, 4, ...
        if op == "sample" and message.get("which") == "window":
            if timers is not None and _state["windows"] % 2 == 1 and own:
                # odd rounds: the oracle follows its window (its refill and warm-up first), the flood over by the reveals
                timers.arm(max(own[-3:]) - 0.03, 0.5 * SPAN_MS / 1000, 2 / 3)
            elif timers is not None and _state["windows"] % 2 == 0 and _state["windows"]:
                timers.arm(5.0, 0.0, 1.0)  # even rounds: the oracle went first; what is left of its flood is put off
            _state["began"] = _now()
        if inflater is not None and op == "window":
            inflater.go()
        return message

    def send_forged(message):
        request = _state.get("request") or {}
        op = request.get("op")
        if op == "sample" and request.get("which", "sample") == "sample" \
                and not request.get("reference") and type(message.get("us")) is float:
            message["us"] = message["us"] / CLAIM
        if inflater is not None and op == "window":
            inflater.stop()
        if timers is not None and op == "reveal" and _state["windows"] % 2 == 0:
            timers.arm(0.002, SPAN_MS / 1000)  # after an odd round's reveal the oracle goes first
        send(message)
        if op == "window":
            own.append(_now() - _state.get("began", _now()))
            _state["windows"] += 1

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
