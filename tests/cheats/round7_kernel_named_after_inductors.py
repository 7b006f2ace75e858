"""Cheat (round 7, GPU): torch does the work, and the candidate's own Triton kernels carry the NAMES of the kernels
torch ran. runners/judge_clock.py ``own_kernel_share`` counts a profiled kernel as the candidate's own when its name
is exactly the name of a kernel the candidate launched (``_same_kernel``: the name, or the name with Triton's
specialisation suffix; no prefix since tests/cheats/kernel_named_void.py). Kernels whose profiler names are plain
identifiers can be named that way: every kernel torch.compile (inductor) generates (``triton_per_fused_...``), and
cuBLAS's GEMMs on Hopper (``nvjet_...``). This RMSNorm computes with ``torch.compile`` of plain torch code; at the
first call of each shape it profiles that call (no profiler of the judge's is running then: the correctness trials
come first) to learn the names inductor gave its kernels, writes a module of its own package per name with a
one-element ``@triton.jit`` kernel of exactly that name, and from then on launches those beside the compiled code.
The launch record names them (its package), the profiler shows inductor's kernels under the same names, and the
own-kernel share is about 100 %: a torch-only computation passes stage ``kernel``, and is credited what inductor's
kernels gain over the baseline's.

It must be refused at stage ``kernel``: a profiled kernel counts as the candidate's own only if it is one the
candidate's Triton compiled (match on the compiled kernel's binary or its address/function handle, which the
launch hook can record from the CompiledKernel, not on a name a module chooses), or the names of the kernels a
library or torch.compile can produce (``triton_``, ``nvjet_``, ``cutlass``, ``sm90_``) are refused as candidate
kernel names. Without CUDA it is torch with a token launch (the CPU interpreter has no profiler share anyway)."""
import importlib
import re
from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def _token_kernel(p):
    tl.store(p, tl.load(p))


_TEMPLATE = '''import triton
import triton.language as tl


@triton.jit
def {name}(p):
    tl.store(p, tl.load(p))
'''
_state: dict = {"compiled": None, "names": {}, "kernels": {}, "scratch": {}}


def _torch_rms(x, weight, eps, residual):
    dtype = x.dtype
    if residual is not None:
        x = x.float() + residual.float()
        new_residual = x.to(dtype)
    else:
        x = x.float()
        new_residual = None
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(dtype)
    return out, new_residual


def _named(name: str):
    """A one-element Triton kernel of this package, named ``name`` (a module of its own, written next to this)."""
    if name not in _state["kernels"]:
        stem = "_named_" + name[:80]
        (Path(__file__).parent / f"{stem}.py").write_text(_TEMPLATE.format(name=name))
        importlib.invalidate_caches()
        module = importlib.import_module(f"{__package__}.{stem}")
        _state["kernels"][name] = getattr(module, name)
    return _state["kernels"][name]


def _learn(fn, *args) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return sorted({e.key for e in prof.key_averages() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", e.key)})


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    device = hidden_states.device
    if device not in _state["scratch"]:
        _state["scratch"][device] = torch.zeros(1, dtype=torch.float32, device=device)
    scratch = _state["scratch"][device]
    if device.type != "cuda":
        _token_kernel[(1,)](scratch)
        out, new_residual = _torch_rms(hidden_states, weight, eps, residual)
        return out if residual is None else (out, new_residual)
    if _state["compiled"] is None:
        dynamo = importlib.import_module("torch._dynamo").config
        for limit in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                      "accumulated_recompile_limit"):
            if hasattr(dynamo, limit):  # one compile per case: never fall back to eager (aten's kernels)
                setattr(dynamo, limit, 4096)
        _state["compiled"] = torch.compile(_torch_rms, dynamic=False)
    fn = _state["compiled"]
    hidden_states = hidden_states.contiguous()  # the layout trials' strided inputs: no compile of their own
    residual = residual.contiguous() if residual is not None else None
    key = (tuple(hidden_states.shape), hidden_states.dtype, residual is not None)
    if key not in _state["names"]:
        _state["names"][key] = _learn(fn, hidden_states, weight, eps, residual)
    out, new_residual = fn(hidden_states, weight, eps, residual)
    for name in _state["names"][key]:
        _named(name)[(1,)](scratch)
    return out if residual is None else (out, new_residual)
