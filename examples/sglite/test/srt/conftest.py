"""Without a CUDA device the kernels run in Triton's CPU interpreter (set before any kernel module loads)."""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
