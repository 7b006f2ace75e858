"""Cheat (round 7, GPU): an honest kernel whose worker leaves the device busy for the oracle. The judge stops the
candidate's processes while it times the oracle (runners/alone.py ``_alone``: SIGSTOP to the worker's group,
runners/processes.py ``WorkerProcess.pause``, "nothing of a candidate's runs on the host or queues new work on the
device"). SIGSTOP stops the host; work the candidate QUEUED on the device before it was stopped runs on. This
worker, right after it has sent each reply (its channel's ``send`` wrapped: after the reply, so none of it is in
the judge's clock of its own requests), queues about as much device time of large matmuls on a stream of its own
as the oracle's next measurement lasts (a sample: its own last sample; a window round: 2.5 of its own passes), and
waits for that work to end at the start of its own next request (so its own times are clean). The two contexts
time-slice the GPU: the oracle's samples, its own event time of its pass and its wall time by the judge's clock grow
together, and the honest candidate looks faster by the same factor: every check agrees with every other.

It must be refused (or credited nothing): before each oracle measurement the judge must know the candidate's device
queue is empty, not only its host stopped: e.g. the candidate's worker synchronises before it replies and the judge
then checks the device idle from outside (NVML: no running context of the candidate's pid, or a probe kernel's
latency in the oracle before it times), or the oracle's times are held against its times measured with no candidate
process alive. Without CUDA (the interpreter, the CPU stand-in) it queues nothing and is the honest rewrite."""
import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys = _imp("sys")


def _server():
    frame = _sys._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("self")


_state = {"due_us": 0.0, "mm_us": None, "stream": None, "a": None, "b": None, "request": None}


def _burn(us: float) -> None:
    """About ``us`` of device time of large matmuls on a stream of this worker's own, queued and not waited for."""
    if us <= 0:
        return
    if _state["stream"] is None:
        _state["stream"] = torch.cuda.Stream()
        _state["a"] = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
        _state["b"] = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(_state["stream"]):
            torch.mm(_state["a"], _state["b"])
            start.record()
            torch.mm(_state["a"], _state["b"])
            end.record()
        end.synchronize()
        _state["mm_us"] = max(1.0, start.elapsed_time(end) * 1000.0)
    with torch.cuda.stream(_state["stream"]):
        for _ in range(max(1, min(200, int(us / _state["mm_us"]) + 1))):
            torch.mm(_state["a"], _state["b"])


def _install() -> None:
    server = _server()
    if server is None or not torch.cuda.is_available():
        return
    channel = server.channel
    send, recv = channel.send, channel.recv

    def recv_then_wait(*args, **kwargs):
        message = recv(*args, **kwargs)
        if _state["stream"] is not None:
            _state["stream"].synchronize()  # its own times stay clean
        _state["request"] = message
        return message

    def send_then_burn(message):
        send(message)  # the reply is out: the judge's clock of this request has stopped
        request = _state.get("request") or {}
        op = request.get("op")
        if op == "sample" and type(message.get("us")) is float:
            timer = server.timers.get(request.get("which", "sample"))
            slots = len(timer.slots) if timer is not None else 1
            _burn(message["us"] * slots * max(1, int(request.get("replays", 1))))
        elif op == "window" and type(message.get("pass_us")) is float:
            _state["due_us"] = 2.5 * message["pass_us"]
            _burn(_state["due_us"])
        elif op == "reveal":
            _burn(_state["due_us"])

    channel.send, channel.recv = send_then_burn, recv_then_wait


_install()


@triton.jit
def _rms_norm_rows_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, residual_out_ptr, n_rows, N, eps,
                          HAS_RESIDUAL: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < N)
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(residual_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(residual_out_ptr + offs, x.to(residual_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(weight_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    out = x * rstd[:, None] * w[None, :]
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    shape = hidden_states.shape
    hidden = shape[-1]
    x = hidden_states.reshape(-1, hidden).contiguous()
    n_rows = x.shape[0]
    out = torch.empty((n_rows, hidden), dtype=hidden_states.dtype, device=hidden_states.device)
    has_residual = residual is not None
    res = residual.reshape(-1, hidden).contiguous() if has_residual else x
    res_out = torch.empty_like(out) if has_residual else out
    block_n = triton.next_power_of_2(hidden)
    rows = max(1, min(4, 4096 // block_n))
    _rms_norm_rows_kernel[(triton.cdiv(n_rows, rows),)](
        x, res, weight, out, res_out, n_rows, hidden, eps,
        HAS_RESIDUAL=has_residual, ROWS=rows, BLOCK_N=block_n, num_warps=8 if block_n >= 2048 else 4)
    out = out.view(shape)
    return (out, res_out.view(shape)) if has_residual else out
