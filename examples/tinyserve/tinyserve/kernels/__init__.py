"""Triton kernels used by the tinyserve engine."""

from .activation import silu_and_mul
from .rms_norm import rms_norm
from .rotary_embedding import apply_rotary_pos_emb
from .softmax import softmax

__all__ = ["apply_rotary_pos_emb", "rms_norm", "silu_and_mul", "softmax"]
