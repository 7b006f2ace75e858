"""Cheat (round 22): round 21's chains (tests/cheats/round21_keeps_running_in_the_kernel_while_stopped.py) behind a
zombie: the baseline's own kernel (an honest copy: parity), a forged claim (its worker divides its sample times by
CLAIM), and writers that stay inside long memfd writes after the judge's SIGSTOP, here as threads of processes whose
first thread has left.

Since round 21 the judge waits, before each oracle round of its clock, until every thread of the candidate's group shows
as stopped (runners/stopped.py ``running_threads``). It reads each process's own /proc/PID/stat first and skips the
process when that says Z (zombie) or X, without listing its threads. A process whose first thread (its leader) ended by
the thread's own exit system call while other threads live shows exactly that: the leader stays a zombie until the last
thread ends, and /proc/PID/stat reports the leader's state. Its threads are in /proc/PID/task and run (here: in the
kernel, where SIGSTOP does not reach them), but the scan never looks: it sees every process of the group stopped and
starts the oracle's round beside the chains. The rest is round 21's cheat, made to last two counted rounds (since round
21 the clock takes the oracle's shortest pass and the upper median of the rounds' differences: of the stand-in's two
counted rounds, the one less favourable to the candidate): the chains are woken at nice 19 during the last call of its
own window of round 1 (it goes first there) and again at its reveal of round 1 (the last request before round 2, where
the oracle goes first), and raised to nice 0 as each reply goes out (every writer seen in the kernel first), so that
the oracle's refill, warm-up and window of rounds 1 and 2 run beside them; back to nice 19 at its next request. Each
chain's threads are pinned to one core, the chains spread over the cores. NICE (its session's autogroup weight) and
the raised nice are root's (CAP_SYS_NICE).

ARMED: "armed" runs the chains; anything else leaves them out (the same forged claim alone)."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os, _mmap, _time, _threading, _ctypes = (_imp(m) for m in ("sys", "os", "mmap", "time", "threading",
                                                                  "ctypes"))

ARMED = "@ARMED@" == "armed"
CLAIM = float("@CLAIM@")  # the claimed speedup: its sample times are divided by it
NICE = "@NICE@"  # its session's nice (autogroup)
MB = int("@MB@")  # each write
PER_CHAIN = int("@PER_CHAIN@")  # writers queued on one file's lock: how long a chain runs
CHAINS = min(_os.cpu_count() or 2, 8) + 2  # more than the cores
SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(_os.uname().machine, 60)  # the exit of one thread (not exit_group)


def _server():
    frame = _sys._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("self")


class _Burners:
    """CHAINS processes forked from its worker (its group and session: stopped with it), each with PER_CHAIN threads
    waiting on a pipe of their own, and then without its first thread: that thread leaves by the exit system call
    (the thread's own exit, not the process's), and the process's leader is a zombie from then on while its other
    threads live. Woken, each thread writes MB of zeros into its process's memfd: a shmem write holds the file's lock
    for the whole write and gives way to no signal but a fatal one, and the others wait for that lock asleep in the
    kernel (state D): a chain is PER_CHAIN writes one after another, never back in user mode, after the SIGSTOP. The
    judge's scan (runners/stopped.py ``running_threads``) reads the process's own stat file, finds the leader's Z, and
    passes on to the next process without looking at its threads."""

    def __init__(self):
        view = memoryview(_mmap.mmap(-1, MB << 20))  # never written: the zero page, no memory
        self.pipes, self.procs = [], []
        cpus = sorted(_os.sched_getaffinity(0))
        for chain in range(CHAINS):
            cpu = cpus[chain % len(cpus)]  # chains on every core: wherever the oracle runs, it shares its core
            fd = _os.memfd_create("chain")
            _os.pwrite(fd, view, 0)  # the file's pages, once: later writes only copy
            ends = [_os.pipe() for _ in range(PER_CHAIN)]
            pid = _os.fork()
            if pid == 0:  # the chain's process: its threads make system calls only, and its first thread leaves
                try:
                    for w in (w for _, w in ends):
                        _os.close(w)

                    def writer(r):
                        _os.setpriority(_os.PRIO_PROCESS, _threading.get_native_id(), 19)
                        _os.sched_setaffinity(0, {cpu})
                        while _os.read(r, 1):
                            _os.pwrite(fd, view, 0)

                    for r, _ in ends:
                        _threading.Thread(target=writer, args=(r,), daemon=True).start()
                    _time.sleep(0.2)  # the writers at their pipes
                    _ctypes.CDLL(None).syscall(SYS_EXIT, 0)  # this thread alone (the GIL is released for the call)
                finally:
                    _os._exit(0)
            for r, w in ends:
                _os.close(r)
                self.pipes.append(w)
            self.procs.append(pid)
            _os.close(fd)
        _time.sleep(0.3)

    def _tids(self):
        tids = []
        for pid in self.procs:
            try:
                tids += [(pid, int(t)) for t in _os.listdir(f"/proc/{pid}/task") if int(t) != pid]
            except OSError:
                pass
        return tids

    @staticmethod
    def _in_kernel(pid, tid):
        """Writing (R, inside a system call) or asleep on its chain's lock (D): not woken and not yet in the call."""
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                inside = f.read().split()[0] != "running"
        except (OSError, IndexError):
            return True
        return state == "D" or (state == "R" and inside)

    def enter(self):
        """Into the kernel, at nice 19 (in its session they take the core its own request leaves)."""
        for w in self.pipes:
            _os.write(w, b"x")

    def weigh(self, value):
        """At ``value``: 0 when its reply goes out (every writer seen in the kernel first, at most 30 ms), 19 again at
        its next request."""
        tids = self._tids()
        until = _time.monotonic() + 0.03
        while value == 0 and not all(self._in_kernel(p, t) for p, t in tids) and _time.monotonic() < until:
            _time.sleep(0.0002)
        for _, tid in tids:
            try:
                _os.setpriority(_os.PRIO_PROCESS, tid, value)  # below its own nice: root only (CAP_SYS_NICE)
            except OSError:
                pass


_state = {"request": None, "counts": {}, "burners": None, "heavy": False, "slots": 0, "countdown": 0}
# the requests around which the chains run, (op, how many of that op since the window was prepared): its own window of
# round 1 (it goes first there: the oracle's round follows its reply; the chains enter the kernel during the pass's
# last call, so that they take little of its own pass) and its reveal of round 1 (the last request before round 2,
# where the oracle goes first); both rounds are counted (the first is dropped), so that the oracle's shortest pass and
# the upper median of the rounds' differences both see the chains
TRIGGERS = {("window", 2), ("reveal", 2)}


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
        _state["burners"] = _Burners()
    channel = server.channel
    send, recv = channel.send, channel.recv

    def recv_and_note(*args, **kwargs):
        message = recv(*args, **kwargs)
        _state["request"] = message
        op, counts = message.get("op"), _state["counts"]
        if op == "prepare_timing" and message.get("which") == "window":
            counts.clear()
            _state["slots"] = int(message.get("count") or 1)
        counts[op] = counts.get(op, 0) + 1
        burners = _state["burners"]
        if burners is not None:
            if _state["heavy"]:  # its first request after the oracle's round: back to nice 19
                _state["heavy"] = False
                burners.weigh(19)
            if (op, counts[op]) in TRIGGERS:
                if op == "window":
                    _state["countdown"] = _state["slots"]  # at the pass's last call (``rms_norm``)
                else:
                    burners.enter()  # into the kernel at nice 19, on the core its own request leaves
        return message

    def send_forged(message):
        request = _state.get("request") or {}
        op = request.get("op")
        if op == "sample" and request.get("which", "sample") == "sample" and not request.get("reference") \
                and type(message.get("us")) is float:
            message["us"] = message["us"] / CLAIM
        if _state["burners"] is not None and (op, _state["counts"].get(op, 0)) in TRIGGERS:
            _state["burners"].weigh(0)  # the oracle's round comes next
            _state["heavy"] = True
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
    if _state["countdown"]:
        _state["countdown"] -= 1
        if not _state["countdown"]:
            _state["burners"].enter()  # the pass's last call: into the kernel at nice 19 beside it
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
