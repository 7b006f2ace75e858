"""The process that runs one job's pipeline for the service's `local` dispatch.

It is started with a scrubbed environment (no webhook secret, no App key, no installation token) and a
checkout that is already on disk. It reads one JSON object on stdin and writes one JSON line per progress
event to the file descriptor given by ``--fd``; nothing else it prints is read.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import traceback


class PipeProgress:
    def __init__(self, stream):
        self.stream = stream

    def _send(self, **msg) -> None:
        self.stream.write(json.dumps(msg) + "\n")
        self.stream.flush()

    def stage(self, text: str, name: str = "") -> None:
        self._send(t="stage", text=text, name=name)

    def search_started(self, budget: int) -> None:
        self._send(t="search", budget=budget)

    def candidate_done(self, candidate, best, failures) -> None:
        self._send(t="candidate", best=best, failures=failures)


def die_with_parent(parent: int) -> None:
    """The service may die (SIGKILL, a lost machine): this worker, and the sandbox it started, die with it."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        return
    if parent and os.getppid() != parent:  # the parent was gone before the signal was armed
        os._exit(1)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--parent", type=int, default=0)
    args = parser.parse_args()
    die_with_parent(args.parent)
    spec = json.loads(sys.stdin.read())
    stream = os.fdopen(args.fd, "w")
    progress = PipeProgress(stream)
    from bot.errors import UserError

    from .runner import load_pipeline, options_for

    try:
        pipeline = load_pipeline(spec["pipeline"])
        opts = options_for(spec["kernel"], spec["options"], spec["target"], spec["out"], spec["backend"])
        result = pipeline(opts, progress)
        progress._send(t="result", verdict=result.verdict, reason=result.report.get("reason") or "",
                       out=str(result.out))
        return 0
    except UserError as exc:
        progress._send(t="error", kind="user", message=str(exc))
        return 2
    except Exception as exc:  # noqa: BLE001 (a crash in the pipeline is recorded on the job, never lost)
        traceback.print_exc()
        progress._send(t="error", kind="crash", message=f"{type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
