"""The judge's window's float inputs (runners/inputs.py ``SlotBank.fill``, ``per_slot_scales=False``) from a counter-based
generator: one write pass over each block on CUDA (at the memory's speed for fp32/fp64, about half of it for fp16/bf16).

The fill runs inside the judge's clock, in each worker's own process. ``Tensor.normal_`` (Philox and Box-Muller) filled
about 3 GB of fp16/bf16 in 3.9 ms on the H200 (0.8 TB/s, a fifth of its bandwidth) and sometimes in 5 ms, while the
timed pass took 1.7 to 5 ms: its variation was noise on the clock, and a candidate's worker could have made the same
bits faster and had the time saved credited to its kernel. Here the elements of a block (flat, padding included) go
in pairs, ``2c`` and ``2c + 1``, from one 64-bit hash of the pair's counter (wrapping arithmetic modulo 2**64):

    x = mix((key + c) * G)      mix: twice ``x ^= x >> 32; x *= M``, then ``x ^= x >> 32``  (element 2c)
    y = xs32(x * M3)            xs32(v) = v ^ (v >> 32)                                      (element 2c + 1)

and an element of hash ``h`` (fields ``h_k = (h >> 16k) & 0xFFFF``) is

    value = dtype(float32(h0 + h1 - h2 - h3) * factor)       factor = float32(std * sqrt(3) / 65536), rounded to nearest

that is ``std * z`` with ``z = (u0 + u1 + u2' + u3' - 2) * sqrt(3)``, ``u_k = (h_k + 0.5) / 65536`` and ``u' = 1 - u``
(an Irwin-Hall sum of four 16-bit uniforms: mean 0, variance 1 - 2**-32, within 2 sqrt(3) of 0). Every step is exact
or rounded once, in integer or float32 arithmetic that CUDA, the Triton interpreter and torch on the CPU do alike, so
the kernel (``_fill_kernel``) and the torch form (``fill_reference``) give the same bits (tests/test_window_fill.py).
``key`` is a 64-bit mix of the fill's seed and the argument (``key_of``). Not a cryptographic generator: nothing rests
on the values being unpredictable once the seed is sent, only on their being drawn after the candidate's kernel is
fixed.

Why this form (the H200, 3 GB a launch): a bare write takes 0.69 ms, ``normal_`` 3.4 ms for fp16/bf16 and 1.7 ms for
fp32. A hash per element (three 64-bit multiplies) with an integer sum of the fields took 1.8 ms for fp16: bound by its
integer instructions, not by memory. A hash per pair, and each field made a float in one instruction (the bits of
``2**23 + h_k``, their differences exact in float32), take 1.36 ms for fp16/bf16 (about 20 instructions an element,
still above the memory's time) and 0.72 ms for fp32 and fp64, the write's own time. SlotBank.fill of a window of 2.15 GB
of bf16: 1.07 ms (median of 60 fills, 1.34 ms the slowest) against 2.53 ms with ``normal_``."""
from __future__ import annotations

import math
import zlib

import numpy as np
import torch
import triton
import triton.language as tl

INTERPRETED = False  # tests set it: the kernel under TRITON_INTERPRET=1 on CPU tensors, to check it against torch
BROKEN: list[str] = []  # why the kernel could not run in this process: the torch form then fills, the same bits, slower

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)  # others keep Tensor.normal_ (inputs.py)
GOLDEN = 0x1E3779B97F4A7C15  # the counter's multiplier (odd, under 2**63: a literal Triton takes as int64)
MIX1 = 0x5851F42D4C957F2D
MIX2 = 0x2545F4914F6CDD1D
MIX3 = 0x14057B7EF767814F  # the pair's second hash from its first
_GOLDEN: tl.constexpr = tl.constexpr(GOLDEN)  # the same numbers as a Triton kernel reads its globals
_MIX1: tl.constexpr = tl.constexpr(MIX1)
_MIX2: tl.constexpr = tl.constexpr(MIX2)
_MIX3: tl.constexpr = tl.constexpr(MIX3)
LANES = 0x0000FFFF0000FFFF  # the low 16 bits of each 32-bit half
EXPONENT = 0x4B000000  # float32 bits of 2**23: with a 16-bit field in the low bits, 2**23 + the field
BLOCK = 4096  # elements a program writes
CHUNK = 1 << 16  # pairs the torch form takes at a time (a few int64 temporaries of this size)
_MASK = (1 << 64) - 1


def supported(block: torch.Tensor) -> bool:
    return block.dtype in DTYPES and block.is_contiguous()


def key_of(seed: int, index: int, name: str) -> int:
    """The generator's key for one argument of one fill: splitmix64 of the seed, the argument's place and a CRC of its
    name, as a signed 64-bit int (what the kernel takes). Python ints only: no device work."""
    v = (int(seed) * 0x9E3779B97F4A7C15 + (int(index) + 1) * 0xD1B54A32D192ED03
         + zlib.crc32(name.encode()) * 0xC2B2AE3D27D4EB4F) & _MASK
    v = ((v ^ (v >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    v = ((v ^ (v >> 27)) * 0x94D049BB133111EB) & _MASK
    v ^= v >> 31
    return v - (1 << 64) if v >> 63 else v


def factor_of(std: float) -> float:
    """``std * sqrt(3) / 65536`` rounded to float32 (a Python float that float32 holds exactly)."""
    return float(np.float32(float(std) * math.sqrt(3.0) / 65536.0))


@triton.jit
def _value(x, factor, exponent):
    """An element's float32 value from its hash: each field as the float 2**23 + h_k (``exponent`` comes at run time,
    so that it sits in a register and each float is one instruction), their differences exact."""
    lo = x.to(tl.uint32)
    hi = (x >> 32).to(tl.uint32)
    f0 = ((lo & 0xFFFF) | exponent).to(tl.float32, bitcast=True)
    f1 = ((lo >> 16) + exponent).to(tl.float32, bitcast=True)  # + for | (no bits in common): one LEA.HI
    f2 = ((hi & 0xFFFF) | exponent).to(tl.float32, bitcast=True)
    f3 = ((hi >> 16) + exponent).to(tl.float32, bitcast=True)
    return ((f0 - f2) + (f1 - f3)) * factor


@triton.jit
def _stored(value, out_ty: tl.constexpr, BF16_BY_HAND: tl.constexpr):
    if BF16_BY_HAND:  # round to nearest even on the bits: the interpreter's own float32 -> bfloat16 truncates
        bits = value.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return bits.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return value.to(out_ty)  # round to nearest even (cvt.rn), as torch's .to


@triton.jit
def _pair_hashes(key, start, BLOCK: tl.constexpr):
    """The hashes of elements ``start .. start + BLOCK`` (``start`` even): per pair, x (element 2c) and y (2c + 1)."""
    pair = tl.arange(0, BLOCK // 2)
    # a key that fits in 32 bits comes as an int32: widened first (with its sign, as the int64 it is)
    base = (key.to(tl.int64).to(tl.uint64, bitcast=True) + (start // 2).to(tl.uint64, bitcast=True)) * _GOLDEN
    x = base + pair.to(tl.uint32).to(tl.uint64) * _GOLDEN  # (key + c) * G, c the pair's counter
    x = x ^ (x >> 32)
    x = x * _MIX1
    x = x ^ (x >> 32)
    x = x * _MIX2
    x = x ^ (x >> 32)
    y = x * _MIX3
    y = y ^ (y >> 32)
    return x, y


@triton.jit(do_not_specialize=["key"])
def _fill_kernel(out_ptr, n, key, factor, exponent, BLOCK: tl.constexpr, BF16_BY_HAND: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    x, y = _pair_hashes(key, start, BLOCK)
    ty: tl.constexpr = out_ptr.dtype.element_ty
    both = tl.join(_stored(_value(x, factor, exponent), ty, BF16_BY_HAND),
                   _stored(_value(y, factor, exponent), ty, BF16_BY_HAND))
    j = tl.arange(0, BLOCK)
    tl.store(out_ptr + start + j, tl.reshape(both, (BLOCK,)), mask=j < n - start)  # x's element, then y's


def _xs32(x: torch.Tensor) -> torch.Tensor:
    """``x ^= x >> 32`` in place, the shift logical (torch's ``>>`` on int64 is arithmetic: masked to the low word)."""
    return x.bitwise_xor_(x.bitwise_right_shift(32).bitwise_and_(0xFFFFFFFF))


def hashes(c: torch.Tensor, key: int) -> torch.Tensor:
    """The two hashes of pair counters ``c`` (int64, consumed): (len(c), 2) int64, the kernel's arithmetic, wrapping
    alike."""
    x = _xs32(c.add_(key).mul_(GOLDEN))
    x = _xs32(_xs32(x.mul_(MIX1)).mul_(MIX2))
    return torch.stack([x, _xs32(x * MIX3)], dim=1)


def values(h: torch.Tensor, std: float, dtype: torch.dtype) -> torch.Tensor:
    """The values of hashes ``h`` (int64) in the torch form."""
    pairs = h.bitwise_right_shift(16).bitwise_and_(LANES).add_(h.bitwise_and(LANES))  # h0 + h1 and h2 + h3
    z = pairs.bitwise_and(0xFFFFFFFF).sub_(pairs.bitwise_right_shift_(32)).to(torch.float32)
    return z.mul_(torch.tensor(factor_of(std), dtype=torch.float32, device=z.device)).to(dtype)


def fill_reference(block: torch.Tensor, key: int, std: float) -> None:
    """Fill ``block`` (contiguous) in place with the torch form, CHUNK pairs at a time, on its own device."""
    flat = block.view(-1)
    n = flat.numel()
    for first in range(0, n, 2 * CHUNK):
        last = min(n, first + 2 * CHUNK)
        c = torch.arange(first // 2, (last + 1) // 2, dtype=torch.int64, device=block.device)
        flat[first:last] = values(hashes(c, key), std, block.dtype).view(-1)[:last - first]


def fill_kernel(block: torch.Tensor, key: int, std: float) -> None:
    n = block.numel()
    if n:
        by_hand = block.dtype == torch.bfloat16 and not block.is_cuda
        _fill_kernel[(triton.cdiv(n, BLOCK),)](block, n, key, factor_of(std), EXPONENT, BLOCK=BLOCK,
                                               BF16_BY_HAND=by_hand)


def fill(block: torch.Tensor, key: int, std: float) -> None:
    """Fill ``block`` (a ``supported`` one) in place: ``std`` times the generator's z for each element, from ``key``.
    The kernel on CUDA (or under the interpreter where INTERPRETED), else the torch form; the same bits either way."""
    if (block.is_cuda or INTERPRETED) and not BROKEN:
        try:
            fill_kernel(block, key, std)
            return
        except Exception as e:  # a backend that cannot compile it: record why, and fill the same bits with torch
            BROKEN.append(f"{type(e).__name__}: {e}")
    fill_reference(block, key, std)
