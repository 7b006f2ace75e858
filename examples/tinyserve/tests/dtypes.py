"""Dtypes and tolerances shared by the kernel tests.

bfloat16 and the serving sizes are tested on a GPU only: under Triton's CPU interpreter (TRITON_INTERPRET=1) the
tests keep to fp16/fp32 and small shapes. A tool's dry run may answer torch.cuda.is_available() with yes there
(kernelsmith's does, so that tests which skip without a GPU still run), and the serving sizes take minutes on a CPU.
"""
import os

import torch

ON_CUDA = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
DTYPES = [torch.float16, torch.float32] + ([torch.bfloat16] if ON_CUDA else [])
TOLS = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.float16: dict(atol=1e-3, rtol=4e-3),
    torch.bfloat16: dict(atol=1e-2, rtol=1.6e-2),
}
