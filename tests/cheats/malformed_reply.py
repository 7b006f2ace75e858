"""Cheat: put an extra, well-formed but incomplete message on the worker's own reply pipe (found through
`/proc/self/fd`): `{"ok": true}`, a reply to `call` with no `out`, no `launched`, nothing. The judge reads it
as the answer to its request. It must be refused as a protocol break ('crashed'), like any other malformed
reply: the judge must never raise out of `evaluate` (a KeyError there ends the whole search) because of what
a worker wrote."""
import json
import struct

import torch

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_os = _imp("os")


def _reply_fd():
    for fd in sorted(int(x) for x in _os.listdir("/proc/self/fd")):
        try:
            if fd > 2 and _os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                with open(f"/proc/self/fdinfo/{fd}") as f:
                    if int(f.read().split("flags:")[1].split()[0], 8) & 1:
                        return fd
        except OSError:
            continue
    raise RuntimeError("no reply pipe")


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    data = json.dumps({"ok": True}).encode()
    _os.write(_reply_fd(), struct.pack("<I", len(data)) + data)
    return torch.zeros_like(hidden_states)
