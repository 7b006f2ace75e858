"""Hides a slowdown behind a claim of parity, where the search's protocol does not look.

The kernel is correct everywhere. At one shape (a hidden size of @SLOW_HIDDEN@, 256 when not set) it is
genuinely slow: every call launches its Triton kernel @REPEATS@ times (the same outputs each time; think of a
rewrite that is slower at some shapes). Elsewhere it launches it four times, a quarter of the baseline's speed,
honestly. What it claims everywhere is the four-launch time: its worker's `prepare_timing` handler (a local of
`Server.serve`, reached by walking up the frames at import, as in forges_sample_times.py) builds the samples'
slot timer from the four-launch function. So no speedup is claimed anywhere, and correctness calls and the
judge's window call the real entry.

Under `Protocol.search()` the judge's clock runs where a speedup is claimed, and at one more case drawn in secret
among the others (runners/judge_clock.py `time_case`, `spot_check`): with m cases claiming no speedup the slow one
is clocked with probability 1/m, and otherwise credited its claim (about 0.25x where the honest credit is about
1/@REPEATS@). The search ranks such a candidate above honest ones that are faster than it really is, and the
geometric mean lets it add any real win it has elsewhere. It must be credited no more than the judge's clock
sees; under the full protocol the clock runs at every case and quarantines it ("not corroborated")."""
import torch
import triton
import triton.language as tl

from .utils import as_rows, next_power_of_2

REPEATS = int("@REPEATS@") if "@REPEATS@".isdigit() else 8
SLOW_HIDDEN = int("@SLOW_HIDDEN@") if "@SLOW_HIDDEN@".isdigit() else 256

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__


def _serve_locals() -> dict:
    """The locals of the worker's `Server.serve`: `self` (the server) and `handlers` (its request handlers)."""
    frame = _imp("sys")._getframe(0)
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    return {} if frame is None else frame.f_locals


@triton.jit
def _rms_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, N, eps, HAS_RESIDUAL: tl.constexpr,
                BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        x = x + tl.load(res_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + row * N + offs, x.to(res_out_ptr.dtype.element_ty), mask=mask)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _norm(hidden_states, weight, eps, residual, launches):
    shape = hidden_states.shape
    x = as_rows(hidden_states).contiguous()
    n_rows, hidden = x.shape
    out = torch.empty_like(x)
    res = as_rows(residual).contiguous() if residual is not None else x
    res_out = torch.empty_like(x) if residual is not None else out
    block = next_power_of_2(hidden)
    for _ in range(launches):
        _rms_kernel[(n_rows,)](x, res, weight, out, res_out, hidden, eps, HAS_RESIDUAL=residual is not None,
                               BLOCK=block)
    out = out.view(shape)
    return (out, res_out.view(shape)) if residual is not None else out


def _claimed(hidden_states, weight, eps=1e-6, residual=None):
    return _norm(hidden_states, weight, eps, residual, 4)  # claims to be slower than the baseline, everywhere


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    launches = REPEATS if hidden_states.shape[-1] == SLOW_HIDDEN else 4
    return _norm(hidden_states, weight, eps, residual, launches)


_locals = _serve_locals()
if "handlers" in _locals:
    _srv, _handlers = _locals["self"], _locals["handlers"]
    _prepare = _handlers["prepare_timing"]

    def _prepare_claimed(req):
        if req.get("which", "sample") != "sample":
            return _prepare(req)
        real = _srv.fn
        _srv.fn = _claimed  # the samples' graph (and slots) run the function that claims parity
        try:
            return _prepare(req)
        finally:
            _srv.fn = real

    _handlers["prepare_timing"] = _prepare_claimed
