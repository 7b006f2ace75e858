"""Cheat (round 29): one timer signal that stalls a core for a millisecond: a process-directed signal walks every
thread of a process that none of them will take (a copy of the baseline with a forged claim).

A signal sent to a process (a POSIX timer's ``SIGEV_SIGNAL``, an interval timer's SIGALRM) is queued on the process
and handed to a thread that wants it (``complete_signal``): where the first thread does not, the kernel walks the
thread list until one does, and a thread that blocks the signal, or is stopped, does not. The worker starts THREADS
threads that run libc's ``pause`` (no Python in them, 64 KiB stacks), the signal blocked in every one, and holds
TIMERS POSIX timers (at most ``MAX_TIMERS``, 16) and its interval timer: each expiry, in the timer's interrupt on the
core that armed it, walks every thread, about 50 ns each (20000-25000 threads: 1-1.4 ms an expiry on this VM). No
thread runs (``stopped.ran_since`` sees nothing), ``armed.could_slow`` counts TIMERS POSIX timers and one process
(threads are not processes: ``MAX_PROCESSES`` counts pids), ``interrupts.storm`` sees TIMERS + 1 interrupts over the
oracle's window, and the seccomp filter refuses none of ``pthread_create``/``clone`` (no namespace flag),
``timer_create``, ``setitimer`` or ``rt_sigprocmask``.

When: as round 28's cheat (the oracle's window predicted from round 0's gap), the expiries spread over it, armed
alternately on each core. Its samples' times are divided by CLAIM.

THREADS: threads that walk (0: the same forged claim without any stall); TIMERS: POSIX timers (at most 16)."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os, _time, _signal, _ctypes = (_imp(m) for m in ("sys", "os", "time", "signal", "ctypes"))

CLAIM = float("@CLAIM@")
THREADS = int("@THREADS@")
TIMERS = int("@TIMERS@")
LAG = float("@LAG@")  # the last expiry this long before the oracle's window is expected to end (s)
SPAN = float("@SPAN@")  # the expiries spread over this many of its own windows before that
SCALE = float("@SCALE@")  # the judge's scan of every thread after the oracle's window, against this process's own


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


class _Fan:
    """THREADS threads in ``pause``, the timers' signal blocked in each; TIMERS POSIX timers and the interval timer."""

    def __init__(self):
        libc = self.libc = _ctypes.CDLL(None, use_errno=True)
        self.cpus = sorted(_os.sched_getaffinity(0))
        self.sig = _signal.SIGRTMIN + 3
        for sig in (self.sig, _signal.SIGALRM):  # taken, later, by a thread that does not block it: nothing happens
            _signal.signal(sig, lambda *args: None)
        _signal.pthread_sigmask(_signal.SIG_BLOCK, {self.sig, _signal.SIGALRM})  # inherited by every new thread
        attr = _ctypes.create_string_buffer(128)
        libc.pthread_attr_init(attr)
        libc.pthread_attr_setstacksize(attr, _ctypes.c_size_t(65536))
        fn, tid = _ctypes.cast(libc.pause, _ctypes.c_void_p), _ctypes.c_ulong()
        self.made = 0
        for _ in range(THREADS):
            if libc.pthread_create(_ctypes.byref(tid), attr, fn, None) != 0:
                break
            self.made += 1
        self.timers = []
        for _ in range(TIMERS):
            t = _ctypes.c_void_p()
            if libc.timer_create(1, _ctypes.byref(_Sigevent(0, self.sig, 0)), _ctypes.byref(t)) != 0:
                break
            self.timers.append(t)
        self.scan = min(self._scan() for _ in range(3))

    @staticmethod
    def _scan():
        """How long the judge's look at every thread after the oracle's window takes (runners/stopped.py cpu_times:
        each thread's stat and schedstat): that much of the gap comes after the oracle's window ends."""
        t0 = _now()
        base = f"/proc/{_os.getpid()}/task"
        for tid in _os.listdir(base):
            for name in ("stat", "schedstat"):
                try:
                    with open(f"{base}/{tid}/{name}", "rb") as f:
                        f.read()
                except OSError:
                    pass
        return _now() - t0

    def arm(self, first, last):
        """Every timer once, at absolute times from ``first`` to ``last`` (monotonic seconds), alternately armed
        from each core; the interval timer at ``last``."""
        try:
            while _signal.sigtimedwait({self.sig, _signal.SIGALRM}, 0) is not None:  # pending ones: a SIGALRM
                pass  # already pending would take the next one without a walk
            for k, t in enumerate(self.timers):
                at = first + (last - first) * k / max(1, len(self.timers) - 1)
                _os.sched_setaffinity(0, {self.cpus[k % len(self.cpus)]})
                spec = _Itimerspec(_Timespec(0, 0), _Timespec(int(at), int((at % 1) * 1e9)))
                self.libc.timer_settime(t, 1, _ctypes.byref(spec), None)  # TIMER_ABSTIME
            left = max(0.001, last - _now())
            self.libc.setitimer(0, _ctypes.byref(_Itimerval(_Timeval(0, 0), _Timeval(int(left), int((left % 1) * 1e6)))),
                                None)
        finally:
            _os.sched_setaffinity(0, set(self.cpus))


def _now():
    return _time.clock_gettime(_time.CLOCK_MONOTONIC)


_state = {"request": None, "windows": 0, "replied": None, "gap": None, "window": None, "armed": 0, "last": None,
          "after_reveal": 0.0}


def _install():
    server = _server()
    if server is None:
        return
    fan = None  # made when the judge's clock is prepared: its threads' stop, while the oracle's samples are taken,
    # would slow those (each thread runs to stop itself) and raise the claim past what the clock can be made to see
    channel = server.channel
    send, recv = channel.send, channel.recv

    def recv_and_note(*args, **kwargs):
        nonlocal fan
        message = recv(*args, **kwargs)
        now = _now()
        _state["request"], _state["received"] = message, now
        op = message.get("op")
        if op == "prepare_timing" and message.get("which") == "window":
            if fan is None and THREADS > 0:
                fan = _Fan()
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
        odd_window = op == "window" and _state["windows"] % 2 == 1
        after_odd = op == "reveal" and _state["windows"] % 2 == 0 and _state["windows"]
        if ready and (odd_window or after_odd):  # the oracle goes next: its window ends about ``gap`` from now
            end = _now() + _state["gap"] - LAG - SCALE * fan.scan + (_state["after_reveal"] if after_odd else 0.0)
            fan.arm(end - SPAN * _state["window"], end)
            _state["armed"] += 1
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
