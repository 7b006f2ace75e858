"""Cheat (round 21): the baseline's own kernel (an honest copy: parity), a forged claim (its worker divides its sample
times by CLAIM), and processes of its own that go on running while the judge has it stopped, for one oracle round.

The judge stops the candidate while it measures the oracle (runners/alone.py ``_alone``: SIGSTOP to the worker's
process group, runners/processes.py ``WorkerProcess.pause``) and starts the oracle at once: it never checks that the
candidate has stopped. SIGSTOP stops a task only on its way back to user mode. A task inside a long system call runs
on, and so does a task asleep (uninterruptibly, state D) on a kernel lock that such a task holds. Here: children
forked at import (in the worker's own process group and session: the judge's SIGSTOP reaches them), in CHAINS chains
of PER_CHAIN, each child writing MB of zeros into its chain's memfd when woken. A shmem write holds the file's lock
for the whole write and gives way only to a fatal signal, so a chain keeps a core busy for PER_CHAIN writes one after
another, none of its children back in user mode in between. (Reads of a memfd's holes were tried: they stop.)

When: woken at the start of its own window of round 1 (the first round counted; the candidate goes first in it,
runners/judge_clock.py ``_clock_rounds``) at nice 19, so that they take the core its own request leaves; set to nice
0 as its reply goes out (every child seen in the kernel first: D, or R inside a system call), so that the oracle's
refill, warm-up and window of that round run beside them; back to 19 at its next request. The paired clock
(runners/corroboration.py ``corroborate``) takes the median of two counted rounds, their mean: of the rounds' wall
differences and of the oracle's passes. One oracle round slowed k times (its pass and its extra alike, so the extra's
spread, the allowance, grows little) reads as a speedup of about (k + 1) / 2.

The scheduler shares the CPU between sessions (autogroup) and the worker has a session of its own, so the chains
compete with the oracle's session as one entity: NICE is written to /proc/self/autogroup, its session's weight, and
the children are raised from nice 19 to 0, both root's (CAP_SYS_NICE; the root fallback of these tests). Without root
the same weight comes from helpers in sessions of their own (behind the uid wall runners/isolation.py ``signal_user``
sends them SIGSTOP too, which a helper inside such a write outlives the same way), and where the workers share a
cgroup (a service or a container: no autogroup) it needs no weight at all. On a GPU the same slowed round comes from
device work queued before the pause (tests/cheats/round7_queues_device_work_before_its_pause.py).

ARMED: "armed" runs the chains; anything else leaves them out (the same forged claim alone)."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os, _mmap, _time = (_imp(m) for m in ("sys", "os", "mmap", "time"))

ARMED = "@ARMED@" == "armed"
CLAIM = float("@CLAIM@")  # the claimed speedup: its sample times are divided by it
NICE = "@NICE@"  # its session's nice (autogroup)
MB = int("@MB@")  # each write
PER_CHAIN = int("@PER_CHAIN@")  # writers queued on one file's lock: how long a chain runs
CHAINS = min(_os.cpu_count() or 2, 8) + 2  # more than the cores


def _server():
    frame = _sys._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("self")


class _Burners:
    """Chains of forked processes of its worker's own group and session (stopped with it), each waiting on a pipe of
    its own; woken, each writes MB of zeros into its chain's memfd. A shmem write holds the file's lock for the whole
    write and gives way to no signal but a fatal one, and the others of its chain wait for that lock asleep in the
    kernel (state D): a chain is PER_CHAIN writes one after another, never back in user mode, after the SIGSTOP."""

    def __init__(self):
        view = memoryview(_mmap.mmap(-1, MB << 20))  # never written: the zero page, no memory
        self.pipes, self.pids = [], []
        for _ in range(CHAINS):
            fd = _os.memfd_create("chain")
            _os.pwrite(fd, view, 0)  # the file's pages, once: later writes only copy
            for _ in range(PER_CHAIN):
                r, w = _os.pipe()
                pid = _os.fork()
                if pid == 0:  # the child: nothing of Python's runtime but these calls
                    try:
                        _os.setpriority(_os.PRIO_PROCESS, 0, 19)
                        while _os.read(r, 1):
                            _os.pwrite(fd, view, 0)
                    finally:
                        _os._exit(0)
                _os.close(r)
                self.pipes.append(w)
                self.pids.append(pid)
            _os.close(fd)

    @staticmethod
    def _in_kernel(pid):
        """Writing (R, inside a system call) or asleep on its chain's lock (D): not woken and not yet in the call."""
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/syscall") as f:
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
        until = _time.monotonic() + 0.03
        while value == 0 and not all(self._in_kernel(pid) for pid in self.pids) and _time.monotonic() < until:
            _time.sleep(0.0002)
        for pid in self.pids:
            try:
                _os.setpriority(_os.PRIO_PROCESS, pid, value)  # below its own nice: root only (CAP_SYS_NICE)
            except OSError:
                pass


_state = {"request": None, "windows": 0, "burners": None}


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
        burners = _state["burners"]
        if burners is not None and message.get("op") == "window" and _state["windows"] == 1:
            burners.enter()  # round 1's window, where it goes first: the oracle's round comes next
        elif burners is not None and _state["windows"] == 2 and not _state.get("calm"):
            _state["calm"] = True
            burners.weigh(19)  # its first request after the oracle's round
        return message

    def send_forged(message):
        request = _state.get("request") or {}
        op = request.get("op")
        if op == "sample" and request.get("which", "sample") == "sample" and not request.get("reference") \
                and type(message.get("us")) is float:
            message["us"] = message["us"] / CLAIM
        if op == "prepare_timing" and request.get("which") == "window":
            _state["windows"] = 0
        if op == "window":
            _state["windows"] += 1
            if _state["windows"] == 2 and _state["burners"] is not None:
                _state["burners"].weigh(0)
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
