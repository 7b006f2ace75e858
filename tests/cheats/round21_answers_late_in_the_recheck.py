"""Cheat (round 21): leaves the shared oracle out of step for the next evaluation, through the re-check that now
follows a quarantine (runners/judge.py ``evaluate``).

A quarantined candidate is re-checked, and "a re-check that cannot run leaves the quarantine as the verdict": every
exception but a Refusal is swallowed there (``except Exception: pass``), the PeerTimeout of a worker that did not
answer by the evaluation's deadline included. Anywhere else such a timeout reaches runners/sandbox.py
``Evaluator.evaluate``, which replaces an oracle caught mid-request (``_restart_oracle_if_busy``). Swallowed, the
evaluation ends as a plain quarantine and the oracle, still working on the request the judge stopped waiting for,
answers it later: its reply waits in the pipe, and the next evaluation's first request to the oracle reads it "out of
turn" (runners/processes.py ``receive``): that evaluation (another candidate's, or a champion's verification on the
same evaluator) ends at stage ``baseline``, a harness error.

This kernel is the baseline's (right everywhere), its worker claims 5x (its sample times divided by 5), so the
judge's clock quarantines it. In the re-check (the first ``call`` after the window rounds) it answers its trial
just before the deadline, which it reckons from its process's start (the judge sets the deadline right after it
spawns the worker) and the evaluator's timeout (TIMEOUT: the configuration's, or the default 300 s), and answers
everything after at once from torch, so that the deadline falls while the judge waits for the oracle."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, get_num_warps, next_power_of_2

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os, _time = (_imp(m) for m in ("sys", "os", "time"))

TIMEOUT = float("@TIMEOUT@")
# its delayed answer this long before the deadline it reckons (early by 0-15 ms: the start time is in 10 ms ticks):
# within the judge's next steps, its comparison, the padded inputs and the oracle's call for them
AHEAD = 0.01


def _started_monotonic() -> float:
    """When this process was started, on the monotonic clock (its start time counts from boot in clock ticks)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    since = _time.clock_gettime(_time.CLOCK_BOOTTIME) - ticks / _os.sysconf("SC_CLK_TCK")
    return _time.monotonic() - since


_DEADLINE = _started_monotonic() + TIMEOUT
_state = {"request": None, "timed": False, "delayed": False}


def _server():
    frame = _sys._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return None if frame is None else frame.f_locals.get("self")


def _install():
    server = _server()
    if server is None:
        return
    channel = server.channel
    send, recv = channel.send, channel.recv

    def recv_and_note(*args, **kwargs):
        message = recv(*args, **kwargs)
        _state["request"] = message
        return message

    def send_late(message):
        request = _state.get("request") or {}
        op = request.get("op")
        if op == "sample" and request.get("which", "sample") == "sample" and type(message.get("us")) is float:
            message["us"] = message["us"] / 5.0
        if op == "window":
            _state["timed"] = True
        if op == "call" and _state["timed"] and not _state["delayed"]:
            _state["delayed"] = True
            wait = _DEADLINE - AHEAD - _time.monotonic()
            if wait > 0.002:
                _time.sleep(wait - 0.002)
            while _time.monotonic() < _DEADLINE - AHEAD:
                pass
        send(message)

    channel.send, channel.recv = send_late, recv_and_note


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


def _torch(hidden_states, weight, eps, residual):
    x = hidden_states.float() + (residual.float() if residual is not None else 0.0)
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return (out, x.to(hidden_states.dtype)) if residual is not None else out


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    if _state["delayed"]:  # past its late answer: at once, so that the judge's time goes to the oracle's calls
        return _torch(hidden_states, weight, eps, residual)
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
