"""Dtypes and tolerances shared by the kernel tests.

bfloat16 is tested on CUDA only: the CPU interpreter path is kept to fp16/fp32.
"""
import torch

ON_CUDA = torch.cuda.is_available()
DTYPES = [torch.float16, torch.float32] + ([torch.bfloat16] if ON_CUDA else [])
TOLS = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.float16: dict(atol=1e-3, rtol=4e-3),
    torch.bfloat16: dict(atol=1e-2, rtol=1.6e-2),
}
