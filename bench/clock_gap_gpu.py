"""Where an honest candidate's window takes longer than the oracle's: the baseline against itself in fresh evaluators,
each counted round of the judge's clock split into the parts both workers report (the candidate's are trusted here
only because it runs the baseline's own code).

    python3 bench/clock_gap_gpu.py OUT.json [variant,...]      (DIAG_SHAPES, DIAG_DTYPES as in bench/judge_diag.py)

Per case and run, the medians over the counted rounds of the candidate's part less the oracle's, in ms: the wall
(the judge's clock), the worker's host time of the request (``host``: lead to commitment), the rest of the wall
(``trip``: the request's way there and back), the device's fill, pass and commitment, and the host's queueing of the
fill (``queue``); then the clock's speedup and the credit (runners/corroboration.py). A variant names a lead: the
default's, or a long one (``lead3ms``) that covers any host queueing, to tell host time from device time."""
from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.evaluator import bundle_for  # noqa: E402
from runners import judge_clock, processes  # noqa: E402
from bench.clock_credit import verdict  # noqa: E402
from runners.corroboration import counted  # noqa: E402
from runners.judge import Protocol  # noqa: E402
from runners.sandbox import Evaluator  # noqa: E402

T1 = [{"T": 1, "H": 4096}, {"T": 1, "H": 4096, "residual": True}]
VARIANTS = {"default": ({}, None), "lead3ms": ({"window_lead_cycles": 6_000_000}, 1000),
            # the candidate's worker without its system-call filter, or without the uid wall: which of the sandbox's
            # parts, if any, its extra comes from (a measurement only: the product never turns them off)
            "noseccomp": ({}, None), "nouid": ({}, None),
            # the judge polling for the window's reply (a core kept busy) or sleeping on the pipe; and the judge on a
            # core of its own, the workers on the others (is a worker slowed by the core it shares with the judge?)
            "nospin": ({}, None), "pinned": ({}, None)}
PARTS = ("host", "queue", "fill", "pass", "commit", "lead", "replay")


def gaps(case) -> dict:
    """The candidate's part less the oracle's, round by round (counted rounds), and their medians."""
    n = len(case.window_parts)
    walls_b, walls_c = case.window_ms[:n], case.window_ms[n:]
    rounds = []
    for wb, wc, b, c in zip(walls_b, walls_c, case.window_parts, case.window_claimed_parts):
        row = {"wall": wc - wb, "trip": (wc - (c.get("host") or 0)) - (wb - (b.get("host") or 0))}
        row.update({k: (c.get(k) or 0) - (b.get(k) or 0) for k in PARTS})
        rounds.append(row)
    kept = counted(rounds)
    v = verdict({"window_ms": case.window_ms, "window_parts": case.window_parts, "window_slots": case.window_slots},
                Protocol())
    return {"median": {k: round(statistics.median(r[k] for r in kept), 4) for k in kept[0]},
            "rounds": rounds, "pass_b": statistics.median(b["pass"] for b in case.window_parts),
            "oracle": case.window_parts, "candidate": case.window_claimed_parts,
            "clock": round(v.judge_speedup, 4), "credit": round(v.credit_speedup or 0, 4), "resolved": v.resolved}


def parse_cpus(text: str) -> list[int]:
    """'0,8' or '0-1' (a sysfs CPU list) as numbers."""
    out = []
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def main() -> None:
    out = Path(sys.argv[1])
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else ["default", "default", "lead3ms"]
    shapes = json.loads(os.environ["DIAG_SHAPES"]) if os.environ.get("DIAG_SHAPES") else T1
    dtypes = os.environ["DIAG_DTYPES"].split(",") if os.environ.get("DIAG_DTYPES") else None
    bundle = bundle_for(os.environ.get("KERNEL", "rms_norm"), shapes, dtypes)
    rows = []
    per_slot = judge_clock.LEAD_CYCLES_PER_SLOT
    install, isolation = processes.syscalls.install, os.environ.get("KS_ISOLATION", "uid")
    spin, init, every_cpu = judge_clock.WINDOW_SPIN_S, processes.WorkerProcess.__init__, os.sched_getaffinity(0)
    first = min(every_cpu)
    siblings = Path(f"/sys/devices/system/cpu/cpu{first}/topology/thread_siblings_list")
    judge_cpus = set(parse_cpus(siblings.read_text())) if siblings.exists() else {first}
    print("cpus", sorted(every_cpu), "judge's when pinned", sorted(judge_cpus), flush=True)

    def pinned_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        os.sched_setaffinity(self.proc.pid, every_cpu - judge_cpus)
    for name in names:
        fields, lead_per_slot = VARIANTS[name]
        protocol = dataclasses.replace(Protocol(), **fields)
        protocol.corroboration_tolerance = 10.0  # measure, do not refuse
        judge_clock.LEAD_CYCLES_PER_SLOT = lead_per_slot or per_slot
        processes.syscalls.install = (lambda: False) if name == "noseccomp" else install
        os.environ["KS_ISOLATION"] = "off" if name == "nouid" else isolation
        judge_clock.WINDOW_SPIN_S = 0.0 if name == "nospin" else spin
        processes.WorkerProcess.__init__ = pinned_init if name == "pinned" else init
        os.sched_setaffinity(0, judge_cpus if name == "pinned" else every_cpu)
        backend = os.environ.get("BACKEND", "triton")
        with Evaluator(bundle, backend, timeout=600, trials=1, spare=False, protocol=protocol) as ev:
            print(name, "isolation:", ev.isolation.describe, flush=True)
            r = ev.evaluate(ev.baseline, seed=11 + len(rows))
        if not r.ok:
            print(name, "ERROR", r.stage, r.error[:300], flush=True)
            continue
        for c in r.cases:
            if not c.window_parts:  # no judge's clock at this case (the interpreter's dry run has none)
                print(name, c.case, "no window:", c.message, flush=True)
                continue
            g = gaps(c)
            rows.append({"variant": name, "case": c.case, "self": c.baseline_us / c.candidate_us,
                         "claimed": c.baseline_us / (c.claimed_us or c.candidate_us), **g})
            med = " ".join(f"{k} {v:+.3f}" for k, v in g["median"].items())
            print(f"{name:8s} {c.case:28s} self {rows[-1]['self']:.4f} clock {g['clock']:.4f} credit {g['credit']:.4f} "
                  f"pass_b {g['pass_b']:.2f} ms | C-B ms: {med}", flush=True)
        out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
