"""A kernel that computes nothing and returns the oracle's own outputs, taken from the oracle's outbox. The judge
deletes the oracle's output files as soon as it has read them, before it calls the candidate (runners/judge.py
`_oracle_call`), but their names are predictable (`c<case>t<trial>-out.bin`, `-out_0.bin`, ...) and the oracle's
outbox is a sibling folder that a candidate of the same user can write (the root fallback, and any deployment as
a normal user). So this candidate creates the files of the judge's next call in the oracle's outbox and keeps
them open: the oracle's writer opens the existing file with O_TRUNC and writes into the same inode, the judge
reads and unlinks the name, and the candidate's descriptor still holds the oracle's answer when the judge calls
it with the same inputs. No race: the files exist before the oracle writes. When a file is missing the answer
is zeros (wrong). It must be refused at correctness: the oracle's outputs must never be reachable from the
candidate's process (a memfd or the pipe instead of a file in a folder the candidate can write, files created
with O_EXCL in a folder of mode 0700 under another user, or the candidate stopped while the oracle works)."""
import glob
import os

import torch
import triton
import triton.language as tl

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys = _imp("sys")
_root = os.path.dirname(os.path.dirname(os.getcwd()))  # the worker runs in <judge root>/candidate-*/work
_outboxes = glob.glob(os.path.join(_root, "oracle-*", "out"))
_held: dict = {}  # file name -> descriptor of a file planted in the oracle's outbox


def _plant(tag: str) -> None:
    for suffix in ("-out.bin", "-out_0.bin", "-out_1.bin"):
        for folder in _outboxes:
            try:
                fd = os.open(os.path.join(folder, tag + suffix), os.O_RDWR | os.O_CREAT, 0o666)
            except OSError:
                continue
            os.fchmod(fd, 0o666)
            _held[tag + suffix] = fd


_plant("c0t0")  # before the judge's first oracle call


@triton.jit
def _token_kernel(x_ptr, scratch_ptr):
    tl.store(scratch_ptr, tl.load(x_ptr))


def _tag() -> str:
    frame = _sys._getframe(1)
    while frame is not None:
        req = frame.f_locals.get("req")
        if isinstance(req, dict) and "tag" in req:
            return str(req["tag"])
        frame = frame.f_back
    return ""


def _oracles(name: str, like: torch.Tensor) -> torch.Tensor:
    fd = _held.get(name)
    data = os.pread(fd, like.numel() * like.element_size() + 1, 0) if fd is not None else b""
    if len(data) != like.numel() * like.element_size():
        return torch.zeros_like(like)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(like.dtype).reshape(like.shape).to(like.device)


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    scratch = torch.empty(1, dtype=hidden_states.dtype, device=hidden_states.device)
    _token_kernel[(1,)](hidden_states, scratch)
    tag = _tag()
    if residual is None:
        out = _oracles(f"{tag}-out.bin", hidden_states)
    else:
        out = (_oracles(f"{tag}-out_0.bin", hidden_states), _oracles(f"{tag}-out_1.bin", hidden_states))
    for fd in _held.values():
        os.close(fd)
    _held.clear()
    if tag.startswith("c") and "t" in tag:  # the judge's next call: the next trial, or the next case's first
        case, trial = (int(x) for x in tag[1:].split("t"))
        _plant(f"c{case}t{trial + 1}")
        _plant(f"c{case + 1}t0")
    return out
