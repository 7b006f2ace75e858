"""An honest kernel that leaves files behind in the machine's shared memory. `/dev/shm` (and `/tmp`) are writable
by every user, the candidate's user included when the uid wall is up, and nothing limits or removes what a
candidate writes outside its own folder: the judge kills a finished candidate's processes, not its files, and
its workers get no RLIMIT_FSIZE. This one writes one megabyte to a path the test chooses (@LITTER@); the same
write of tens of gigabytes fills the tmpfs that holds the judge's exchange and the oracle's outbox (every later
evaluation then fails to write its inputs, and is blamed on its candidate) and the machine's memory with it. It
must not outlive the evaluation: workers in a mount namespace of their own with a private, size-limited tmpfs
for /dev/shm and /tmp (or a quota), and the judge's exchange on storage a candidate cannot fill."""
import torch
import triton
import triton.language as tl

with open("@LITTER@", "wb") as _f:
    _f.write(b"\0" * (1 << 20))


@triton.jit
def _rms_kernel(x_ptr, w_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * N + offs, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    x = hidden_states.contiguous() if residual is None else (hidden_states + residual).contiguous()
    out = torch.empty_like(x)
    _rms_kernel[(x.shape[0],)](x, weight, out, x.shape[1], eps, BLOCK=triton.next_power_of_2(x.shape[1]))
    return out if residual is None else (out, x)
