"""Cheat (round 8, GPU): torch does the work, and the candidate's own Triton kernel is named ``triton``.

Round 7's cheat took the exact names inductor gives its kernels; runners/judge_clock.py ``borrowed_name`` refuses
those now (``triton_per_``, ``triton_poi_``, ..., ``nvjet_``, ``sm90_xmma_``). But the share rule
(``_same_kernel``) still counts a profiled kernel as the candidate's when its name is the candidate's kernel name
followed by ``_`` and any lowercase identifier with a digit in it (meant for Triton's specialisation suffix,
``_0d1d2de``). Every kernel torch.compile generates is ``triton_`` + ``poi_fused_..._0`` (lowercase, digits,
underscores): a kernel of the candidate's own named ``triton`` claims all of them, and ``borrowed_name("triton")``
is False (the pattern wants ``triton_poi_`` and the like). The same holds for ``ampere`` (cuBLAS's
``ampere_fp16_s16816gemm_..._nn``) and ``sm90`` (``sm90_xmma_gemm_...``). This RMSNorm computes with
``torch.compile`` of plain torch code and launches a one-element kernel named ``triton`` beside it: its own share
is about 100 % and a torch-only computation passes stage ``kernel`` (on the CPU, plain torch and the token kernel:
the launch record shows a kernel of its own package, so it passes there too).

It must be refused at stage ``kernel``: the specialisation suffix must be Triton's (digits and the letters of its
specialisation, no underscore: ``re.fullmatch(r"\\d[0-9a-z]*", suffix)``), and a candidate kernel name that is a
prefix of a library's or inductor's naming scheme (``triton``, ``triton_poi``, ``sm90``, ``ampere``, ``cutlass``,
``nvjet``) refused like the full names."""
import importlib

import torch
import triton as _triton
import triton.language as tl


@_triton.jit
def triton(p):  # the kernel's name is the point: the profiler shows it as `triton`
    tl.store(p, tl.load(p))


_state: dict = {"compiled": None, "scratch": {}}


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


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    device = hidden_states.device
    if device not in _state["scratch"]:
        _state["scratch"][device] = torch.zeros(1, dtype=torch.float32, device=device)
    triton[(1,)](_state["scratch"][device])
    fn = _torch_rms
    if device.type == "cuda":
        if _state["compiled"] is None:
            dynamo = importlib.import_module("torch._dynamo").config
            for limit in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                          "accumulated_recompile_limit"):
                if hasattr(dynamo, limit):  # one compile per case: never fall back to eager (aten's kernels)
                    setattr(dynamo, limit, 4096)
            _state["compiled"] = torch.compile(_torch_rms, dynamic=False)
        fn = _state["compiled"]
        hidden_states = hidden_states.contiguous()
        residual = residual.contiguous() if residual is not None else None
    out, new_residual = fn(hidden_states, weight, eps, residual)
    return out if residual is None else (out, new_residual)
