"""What the judge reads back from a worker after its clock: the per-slot commitments of a window and the
chunk-level nodes and checkpoints' traces the digest covers, checked against the digest sent when the pass ended, and
the opened chunks climbed to those nodes (runners/openings.py). ``WindowChecks`` is a half of ``TimingSteps``
(runners/judge_clock.py), which is a half of the judge."""
from __future__ import annotations

import torch

from . import checkpoints
from .commitments import ROW_BUDGET_WORDS, _padded_words, digest
from .openings import OpeningError, check_openings
from .protocol import Refusal
from .wire import WireError, decode_value


class WindowChecks:
    """Methods of the judge that read a window's commitments back; they use its two workers."""

    def _window_hashes(self, worker, reply: dict, count: int, key: int, root) -> tuple[list[int], dict]:
        """A worker's per-slot commitments of a window (an int64 file of ``count`` values, shown after the clock) and
        its outputs' chunk-level nodes (runners/openings.py), checked against the digest it sent when its pass
        ended. Returns the commitments, the rows ((position, first slot) -> (level, nbytes, nodes, members)) and the
        checkpoints' traces with their layout (runners/checkpoints.py), which the digest covers too."""
        stage = "timing" if worker is self.candidate else "baseline"
        rows: dict = {}
        try:
            hashes = decode_value(reply.get("commitments"), worker.outbox, 8 * count)
            budget = [8 * ROW_BUDGET_WORDS]
            listed = reply.get("rows") or []
            if not isinstance(listed, list) or not all(isinstance(row, dict) for row in listed):
                raise WireError("the rows of nodes are not a list of rows")
            for row in listed:
                p, level, nbytes, members = row.get("position"), row.get("level"), row.get("nbytes"), row.get("slots")
                if members is not None and not (isinstance(members, list) and members and all(
                        type(m) is int and 0 <= m < count for m in members) and members == sorted(set(members))):
                    raise WireError("a block of rows whose slots are not a list of distinct slots in order")
                block = (p, members[0] if members else 0)
                if type(p) is not int or block in rows or type(level) is not int or not 0 <= level < 64 \
                        or type(nbytes) is not int or nbytes < 0:
                    raise WireError("a row of nodes that names no output")
                nodes = decode_value(row.get("nodes"), worker.outbox, budget[0], budget=budget)
                if not (type(nodes) is torch.Tensor and nodes.dtype == torch.int64 and nodes.dim() == 2
                        and nodes.shape[0] == (len(members) if members else count)
                        and nodes.shape[1] == _padded_words(nbytes) >> level):
                    raise WireError(f"the row of nodes of output {p} has the wrong form")
                rows[block] = (level, nbytes, nodes, tuple(members) if members else None)
            traces = checkpoints.read_traces(reply, lambda meta, most: decode_value(meta, worker.outbox, most))
        except WireError as exc:
            raise Refusal(stage, f"the per-slot commitments of the judge's window could not be read: {exc}") from exc
        if not (type(hashes) is torch.Tensor and hashes.dtype == torch.int64 and tuple(hashes.shape) == (count,)
                and type(root) is int and digest(hashes, key, [rows[b][2] for b in sorted(rows)], traces[0]) == root):
            raise Refusal(stage, "the per-slot commitments shown are not the ones committed to when the judge's "
                                 "window ended (work done after the clock stopped)")
        return [int(h) for h in hashes.tolist()], rows, traces

    def _opened(self, worker, reply: dict, opening: dict, count: int, root, hashes=None) -> dict:
        """A worker's opened chunks, each checked up to the nodes it committed to (on the CPU)."""
        stage = "timing" if worker is self.candidate else "baseline"
        commits, rows = (hashes or self._window_hashes(worker, reply, count, opening["key"], root))[:2]
        try:
            return check_openings(reply.get("open"), lambda meta, most: decode_value(meta, worker.outbox, most),
                                  commits, rows, opening["slots"], opening["seed"], opening["per"], opening["key"])
        except (OpeningError, WireError) as exc:
            raise Refusal(stage, f"an opened slot of the judge's window: {exc}") from exc
