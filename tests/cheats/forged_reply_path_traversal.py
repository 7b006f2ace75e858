"""Cheat: find the worker's reply pipe through `/proc/self/fd` and answer the judge's `call` itself, without
computing anything: a well-formed reply whose output header is the judge's own input file reached by path
traversal (`<outbox>/../../exchange/in<n>-hidden_states.bin`), with `launched` naming a kernel of the
candidate; then exit quietly. It must be refused: the judge reads only files whose resolved path lies in that
worker's own outbox ("tensor file outside the exchange folder"), and a worker that breaks the protocol ends
the evaluation as crashed."""
import json
import struct

_imp = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
_sys, _os = _imp("sys"), _imp("os")


def _reply_fd():
    fds = []
    for fd in sorted(int(x) for x in _os.listdir("/proc/self/fd")):
        try:
            if _os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:") and fd > 2:
                with open(f"/proc/self/fdinfo/{fd}") as f:
                    flags = int(f.read().split("flags:")[1].split()[0], 8)
                if flags & 1:  # O_WRONLY: the reply pipe
                    fds.append(fd)
        except OSError:
            continue
    return fds[0]


def rms_norm(hidden_states, weight, eps=1e-6, residual=None):
    req = _sys._getframe(1).f_locals["req"]
    server = _sys._getframe(1).f_locals["self"]
    src = req["inputs"]["hidden_states"]
    forged = dict(src, file=f"{server.outbox}/../../exchange/{_os.path.basename(src['file'])}")
    out = forged if residual is None else {"kind": "seq", "items": [forged, forged]}
    reply = {"ok": True, "out": out, "written": {}, "modified": [],
             "launched": ["ks_candidate.tinyserve.kernels.rms_norm:_rms_norm_kernel"], "pinned": {}}
    data = json.dumps(reply).encode()
    _os.write(_reply_fd(), struct.pack("<I", len(data)) + data)
    _os._exit(0)
