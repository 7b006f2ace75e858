"""The engine on a GPU: the launch-parameter tuner and the LLM path (recorded answers served by the
loopback LLM server) on the same kernel, each for the same number of evaluations; best speedup against
evaluations spent, the LLM champion re-verified (fresh seeds, more trials, held-out cases), a plot.

    python bench/engine_h200.py --out DIR [--kernel softmax] [--budget 10] [--backend triton]
"""
from __future__ import annotations

import argparse
import difflib
import json
import logging
import secrets
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.config import load_config, task_spec
from evolver.candidate import Candidate
from evolver.engine import EngineOptions, new_archive, run_search
from runners.extract import build_bundle
from runners.extract import copy_reference
from runners.sandbox import Evaluator


def _load_server():
    """The loopback server, loaded by path (a `tests` package installed on the machine must not shadow it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ks_llm_server", ROOT / "tests/llm_server/server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RecordedLLM


RecordedLLM = _load_server()

EXAMPLE = ROOT / "examples" / "tinyserve"
log = logging.getLogger("kernelsmith")


def score(c: Candidate) -> float:
    return c.fitness if (c.correct and c.fitness is not None) else 0.0


def run_path(name: str, bundle: Path, backend: str, opts: EngineOptions, out: Path, seed: int,
             save=lambda partial: None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    curve, started = [], time.monotonic()
    with Evaluator(bundle, backend, timeout=120, trials=2) as evaluator:
        baseline = Candidate(0, evaluator.baseline, "baseline")
        baseline.evaluation = evaluator.evaluate(baseline.source, secrets.randbits(62))
        best = {"v": 1.0}

        def on_result(c: Candidate) -> None:
            best["v"] = max(best["v"], score(c))
            curve.append({"evaluation": len(curve) + 1, "id": c.id, "operator": c.operator, "stage":
                          c.evaluation.stage, "fitness": c.fitness, "best": best["v"],
                          "seconds": round(time.monotonic() - started, 1),
                          "error": c.evaluation.error.splitlines()[0][:200] if c.evaluation.error else ""})
            print(f"[{name}] {curve[-1]}", flush=True)
            save({"curve": curve, "partial": True})  # a run cut short by its time limit keeps its curve

        engine = run_search(evaluator, baseline, opts, out, seed, on_result, archive=new_archive(opts))
        champion = engine.archive.best()
        result = {"summary": {"evaluated": engine.summary.evaluated, "stop": engine.summary.stop,
                              "duplicates_rejected": engine.summary.duplicates_rejected,
                              "rejected_proposals": engine.summary.rejected_proposals,
                              "models": engine.summary.usage},
                  "curve": curve, "baseline": baseline.evaluation.to_dict(), "champion": None}
        if champion is not None and champion.id != 0:
            check = evaluator.evaluate(champion.source, secrets.randbits(62), time_it=True, trials=4)
            held = evaluator.evaluate(champion.source, secrets.randbits(62), time_it=False, case_set="held_out",
                                      trials=2) if evaluator.spec.held_out else None
            result["champion"] = {"id": champion.id, "operator": champion.operator, "search_fitness": champion.fitness,
                                  "genome": champion.genome, "verify": check.to_dict(),
                                  "held_out_ok": held.ok if held else None,
                                  "held_out_error": held.error if held else None}
            diff = difflib.unified_diff(baseline.source.splitlines(True), champion.source.splitlines(True),
                                        "a/" + evaluator.spec.module, "b/" + evaluator.spec.module)
            (out / "champion.diff").write_text("".join(diff))
        engine.store.close()
    return result


def plot(results: dict, path: Path, title: str = "softmax on the H200: tuner vs LLM rewrites (recorded answers)") -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, r in results.items():
        xs = [0] + [p["evaluation"] for p in r["curve"]]
        ys = [1.0] + [p["best"] for p in r["curve"]]
        ax.step(xs, ys, where="post", label=name, linewidth=2)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("evaluations spent")
    ax.set_ylabel("best geomean speedup over the baseline")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def write_summary(results: dict, path: Path) -> None:
    lines = ["| path | evaluations | stop | best speedup | reached at evaluation | failed | rejected before evaluation |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for name, r in results.items():
        curve = r.get("curve", [])
        best = max([1.0] + [p["best"] for p in curve])
        at = next((p["evaluation"] for p in curve if p["best"] == best and best > 1.0), "–")
        summary = r.get("summary", {})
        failed = sum(1 for p in curve if p["stage"] != "done")
        lines.append(f"| {name} | {len(curve)} | {summary.get('stop', 'cut short')} | {best:.3f}x | {at} | "
                     f"{failed} | {summary.get('rejected_proposals', 0)} + {summary.get('duplicates_rejected', 0)} "
                     "duplicates |")
    for name, r in results.items():
        champ = r.get("champion")
        if not champ:
            continue
        v = champ["verify"]
        lines += ["", f"### {name}: champion candidate {champ['id']} ({champ['operator']}), re-verified",
                  (f"search fitness {champ['search_fitness']:.3f}x; re-timed in a fresh worker with new seeds: stage "
                  f"{v['stage']}, fitness {v['fitness'] if v['fitness'] is None else format(v['fitness'], '.3f')}"
                  f"x; held-out cases correct: {champ['held_out_ok']}"), "",
                  "| case | baseline µs | candidate µs | speedup |", "| --- | ---: | ---: | ---: |"]
        for c in v["cases"]:
            sp = c.get("speedup")
            lines.append(f"| {c['case']} | {c['baseline_us'] or 0:.2f} | {c['candidate_us'] or 0:.2f} | "
                         f"{sp if sp is None else format(sp, '.3f')} |")
    for name, r in results.items():
        failures = [p for p in r.get("curve", []) if p["stage"] != "done"]
        if failures:
            lines += ["", f"### {name}: candidates that failed", ""]
            lines += [f"- {p['id']} ({p['operator']}) at {p['stage']}: {p['error']}" for p in failures]
    path.write_text("\n".join(lines) + "\n")


def curve_from_store(run_dir: Path) -> list[dict]:
    """Best speedup against evaluations, read back from a run's store (e.g. an `optimize --models` run)."""
    from evolver.store import RunStore

    store = RunStore(run_dir / "run.sqlite")
    rows = sorted((r for r in store.rows("evaluated") if r["id"] != 0), key=lambda r: r["evaluated_at"] or 0)
    store.close()
    curve, best = [], 1.0
    for i, r in enumerate(rows, 1):
        ev = json.loads(r["evaluation"])
        fit = r["fitness"] if r["correct"] and r["fitness"] is not None else 0.0
        best = max(best, fit)
        curve.append({"evaluation": i, "id": r["id"], "operator": r["operator"], "stage": ev["stage"],
                      "fitness": r["fitness"], "best": best, "seconds": None,
                      "error": ev["error"].splitlines()[0][:200] if ev["error"] else ""})
    return curve


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--kernel", default="softmax")
    parser.add_argument("--budget", type=int, default=10)
    parser.add_argument("--backend", default="triton")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--script", type=Path, default=ROOT / "tests/llm_server/scripts/softmax_h200.json")
    parser.add_argument("--paths", default="tuner,llm", help="tuner, llm, seed (rewrites seeded from torch.compile)")
    parser.add_argument("--inductor-timeout", type=float, default=90.0)
    parser.add_argument("--inductor-code", type=Path, help="a recorded capture to offer instead of generating one")
    parser.add_argument("--plot-only", action="store_true", help="re-plot engine.json (and --optimize-run)")
    parser.add_argument("--optimize-run", type=Path, help="an `optimize --models` run folder to plot as well")
    args = parser.parse_args()
    if args.plot_only:
        path = args.out / "engine.json"
        results = json.loads(path.read_text()) if path.exists() else {}
        if args.optimize_run and (args.optimize_run / "run.sqlite").exists():
            from evolver.store import RunStore

            store = RunStore(args.optimize_run / "run.sqlite")
            stop = store.get("stop") or "cut short"
            store.close()
            results["llm (kernelsmith optimize)"] = {"curve": curve_from_store(args.optimize_run),
                                                     "summary": {"stop": stop}}
        write_summary(results, args.out / "summary.md")
        print("plot:", plot(results, args.out / "best_vs_evaluations.png"))
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    spec = task_spec(args.kernel, load_config(EXAMPLE).kernels[args.kernel], args.backend)
    bundle = args.out / "bundle"
    build_bundle(EXAMPLE, spec, bundle)
    copy_reference(EXAMPLE, bundle, spec.reference)  # torch.compile's code for it is the LLM's seed
    results = {}
    with RecordedLLM(args.script) as server:
        models = args.out / "models.yaml"
        models.write_text(json.dumps({"models": [{
            "name": "recorded-local", "provider": "openai", "model": "recorded", "base_url": server.url + "/v1",
            "timeout_s": 30, "max_retries": 3, "backoff_s": 0.05}]}))
        for name in args.paths.split(","):
            if name == "tuner":
                opts = EngineOptions(budget=args.budget, operators=["tuner"])
            elif name == "seed":  # rewrites only, two islands: each island's first rewrite ports torch.compile's code
                opts = EngineOptions(budget=args.budget, models=models, operators=["rewrite"], islands=2, in_flight=2,
                                     preset="kernel-smith", inductor_timeout_s=args.inductor_timeout,
                                     inductor_code=args.inductor_code)
            else:
                opts = EngineOptions(budget=args.budget, models=models, operators=["rewrite", "diff"],
                                     preset="kernel-smith")
            def save(partial, name=name):
                results[name] = partial
                (args.out / "engine.json").write_text(json.dumps(results, indent=1, default=str))

            save(run_path(name, bundle, args.backend, opts, args.out / name, args.seed, save))
    write_summary(results, args.out / "summary.md")
    plotted = plot(results, args.out / "best_vs_evaluations.png",
                   f"{args.kernel} on {args.backend}: {', '.join(results)} (recorded answers)")
    print("plot:", plotted, flush=True)


if __name__ == "__main__":
    main()
