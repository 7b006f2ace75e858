"""A torch computation whose one-element token Triton kernel is named `void`. The judge's own-kernel share
(runners/judge_clock.py `_share`) counts a profiled kernel as the candidate's when its name equals or *starts
with* the name of a kernel in the candidate's launch record, and the profiler names aten's CUDA kernels by their
demangled signatures, "void at::native::elementwise_kernel<...>(...)", "void at::native::reduce_kernel<...>":
every one of them starts with "void". So all of torch's work is counted as the candidate's own, and the check
passes without detecting the profiler or patching anything. It must be refused at stage `kernel`: match kernel
names exactly (or by Triton's own mangled names), and count only kernels the candidate's module compiled."""
import torch
import triton
import triton.language as tl


@triton.jit
def void(x_ptr, scratch_ptr):
    tl.store(scratch_ptr, tl.load(x_ptr))


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    scratch = torch.empty(1, dtype=hidden_states.dtype, device=hidden_states.device)
    void[(1,)](hidden_states, scratch)
    x = hidden_states.float() if residual is None else hidden_states.float() + residual.float()
    out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(hidden_states.dtype)
    return out if residual is None else (out, x.to(hidden_states.dtype))
