"""The judge's clock replayed offline: what ``runners/corroboration.py`` made of recorded windows, and the spread of
its view when the two sides run the same kernel. Reads the part (a) files of bench/evaluator.py, whose cases keep
the walls, the oracle's parts and the slots of each window (``window_ms``, ``window_parts``, ``window_slots``).

    python3 bench/clock_credit.py bench/results/evaluator-h200/session14/call3/a-all/evaluator.json [...]

Per case and run: the clock's ratio as the judge computed it (replayed, and checked against the recorded one), the
two sides' offset (the candidate's shortest wall less the oracle's) and the walls' movement within a side over the
counted rounds, in ms; then the root-mean-square of the log ratio, which is what the credit cap
(``credit_cap``: the clock's view plus 5 %) meets in an honest candidate."""
from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from runners.corroboration import corroborate  # noqa: E402
from runners.judge import Protocol  # noqa: E402


def windows(paths: list[str]):
    for path in paths:
        for kernel, part in json.loads(Path(path).read_text())["a"].items():
            for run in part.get("runs", []) if isinstance(part, dict) else []:  # the part's summary numbers aside
                for case, row in run.items():
                    if not case.startswith("_") and isinstance(row, dict) and row.get("window_ms"):
                        yield kernel, case, row


def verdict(row: dict, p: Protocol):
    """``corroborate`` on a recorded window (its walls, the oracle's parts, its slots), claims of parity."""
    walls = [w * 1000 for w in row["window_ms"]]
    half = len(walls) // 2
    parts = row["window_parts"]
    passes = [q["pass"] * 1000 for q in parts]
    return corroborate(walls[:half], passes, walls[half:], 1.0, 1.0, p.corroboration_tolerance, p.clock_jitter_us,
                       [(q["lead"] + q["commit"]) * 1000 for q in parts], row["window_slots"],
                       [q["lead"] * 1000 for q in parts], [q.get("checks", 0.0) * 1000 for q in parts])


def replay(row: dict, p: Protocol) -> tuple[float, float, float]:
    """(the clock's ratio of the candidate's pass to the oracle's, the offset of the shortest walls, the movement), ms."""
    v = verdict(row, p)
    walls = [w * 1000 for w in row["window_ms"]]
    half = len(walls) // 2
    wb, wc = walls[1:half], walls[half + 1:]
    return 1 / v.judge_speedup, (min(wc) - min(wb)) / 1000, max(max(wb) - min(wb), max(wc) - min(wc)) / 1000


def main() -> None:
    p = Protocol()
    logs = []
    for kernel, case, row in windows(sys.argv[1:]):
        ratio, offset, movement = replay(row, p)
        logs.append(math.log(ratio))
        recorded = row.get("judge_ratio")
        # the oracle's host time in its request beyond its device parts (recorded from the fourteenth session on)
        gaps = [q["host"] - q["pass"] - q["fill"] - q["commit"] - q["lead"] for q in row["window_parts"][1:] if "host" in q]
        gap = f" host gaps {', '.join(f'{g:.3f}' for g in gaps)} ms" if gaps else ""
        print(f"{kernel:22s} {case:32s} slots {row['window_slots']:5d} ratio {ratio:6.3f} (recorded "
              f"{'unresolved' if recorded is None else f'{recorded:.3f}'}) offset {offset:+.3f} ms movement "
              f"{movement:.3f} ms credited {row['speedup']:.4f}{gap}")
    if logs:
        rms = math.sqrt(statistics.fmean(x * x for x in logs))
        inside = sum(abs(x) <= math.log(1.05) for x in logs)
        print(f"{len(logs)} windows: rms of the log ratio {rms:.3f}; within 5 % of parity: {inside}")


if __name__ == "__main__":
    main()
