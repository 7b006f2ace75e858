"""The judge's window round by round, from bench/judge_diag.py's output (a line per case with the walls, the oracle's
parts and the candidate's own account of its parts): where each side's wall goes (pass, fill, commitment, host) and
what several estimators of the clock's ratio make of the counted rounds, against the ratio of the two sides' pass
times by their own events (the candidate's: its claim, trusted here only because both sides run the baseline).

    python3 bench/window_rounds.py bench/results/evaluator-h200/session15/call1/noise.txt"""
from __future__ import annotations

import ast
import re
import statistics as st
import sys


def rows(path: str):
    for line in open(path):
        if "walls [" not in line or "candidate's parts [" not in line:
            continue
        name, case = line.split()[:2]
        walls = ast.literal_eval(re.search(r"walls (\[.*?\])", line).group(1))
        ob = ast.literal_eval(re.search(r"oracle parts (\[.*?\]) candidate", line).group(1))
        cp = ast.literal_eval(re.search(r"candidate's parts (\[.*?\])", line).group(1))
        yield name, case, walls, ob, cp


def main() -> None:
    for name, case, walls, ob, cp in rows(sys.argv[1]):
        n = len(walls) // 2
        wb, wc, ob, cp = walls[1:n], walls[n + 1:], ob[1:], cp[1:]  # the first round is a warm-up
        pb, pc = [o["pass"] for o in ob], [c["pass"] for c in cp]
        extras = [w - p for w, p in zip(wb, pb)]
        events = st.median(pc) / st.median(pb)
        current = (min(wc) - st.median(extras)) / min(pb)  # runners/corroboration.py, before the checkpoints' time
        paired = st.median([(c - e) / p for c, e, p in zip(wc, extras, pb)])
        minmin = (min(wc) - min(wb)) / st.median(pb) + 1
        spread = {part: max(o[part] for o in ob) - min(o[part] for o in ob) for part in ("pass", "fill", "commit")}
        fill = st.median(o["fill"] for o in ob)
        print(f"{name:14s} {case:28s} rounds {len(wb)} pass {st.median(pb):6.3f} fill {fill:6.3f}"
              f" commit {st.median(o['commit'] for o in ob):6.3f} ms; oracle's range pass/fill/commit "
              f"{spread['pass']:.3f}/{spread['fill']:.3f}/{spread['commit']:.3f} ms, walls {max(wb) - min(wb):.3f} | "
              f"ratio by events {events:.3f}, clock {current:.3f}, paired median {paired:.3f}, min-min {minmin:.3f}")


if __name__ == "__main__":
    main()
