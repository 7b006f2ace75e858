"""The PR body rendered from report data: the numbers a maintainer reads must be the ones measured."""
from bot.report import build_report, render_markdown
from evolver.archive import Archive
from evolver.candidate import Candidate
from runners.results import CaseResult, Environment, Evaluation
from runners.task import Case, TaskSpec

SPEC = TaskSpec(kernel="rms_norm", module="pkg/rms_norm.py", entry="rms_norm", args=[],
                cases=[Case({"T": 1}, "float16"), Case({"T": 64}, "float16")])
ENV = Environment(backend="triton", device="NVIDIA H200", driver="580.1", cuda="13.0", torch="2.11",
                  triton="3.6", python="3.12", peak_bandwidth_gbs=4100.0)


def timed_eval(speedups):
    cases = [CaseResult(c.id, correct=True, trials=5, err_ratio=0.25, max_abs_err=1e-3, baseline_us=10.0,
                        candidate_us=10.0 / s, baseline_spread=0.01, candidate_spread=0.02, baseline_host_us=30.0,
                        candidate_host_us=29.0, timing_method="cuda-graph", judge_us=10.0 / s + 0.1,
                        launched=["ks_candidate.k:_kernel"]) for c, s in zip(SPEC.cases, speedups)]
    return Evaluation(stage="done", ok=True, timed=True, cases=cases, env=ENV)


def report(verdict, shown, champion=None, reason="", shown_kind="best_candidate"):
    archive = Archive()
    failed = Candidate(1, "x = 1", "tuner", evaluation=Evaluation(stage="compile", error="boom"))
    archive.add(failed)
    test = {"command": "python -m pytest -q t.py", "passed": True, "returncode": 0, "duration_s": 1.5,
            "output_tail": "", "with_champion": True}
    return build_report(spec=SPEC, backend="triton", verdict=verdict, reason=reason, shown=shown,
                        champion=champion, changes=["k (line 9): num_warps 4 -> 8"], archive=archive,
                        search={"budget": 8, "evaluated": 8, "failures": 1, "duplicates_rejected": 2,
                                "exhausted": False, "best_fitness": 1.2, "knobs": ["k#0.num_warps"]},
                        repo_test=test if champion else None, baseline_repo_test={**test, "with_champion": False},
                        trials=5, held_out_cases=2 if champion else 0,
                        target={"commit": "a" * 40, "module": SPEC.module}, reproduce="kernelsmith optimize x",
                        notes=[], shown_kind=shown_kind)


def test_improved_report_shows_measured_numbers():
    shown = timed_eval([1.25, 1.1])
    champion = Candidate(3, "src", "tuner", genome={"k#0.num_warps": 3}, evaluation=shown)
    r = report("improved", shown, champion)
    md = render_markdown(r)
    assert abs(r["champion"]["geomean_speedup"] - (1.25 * 1.1) ** 0.5) < 1e-9
    assert "Triton kernels the new code launched: `_kernel`" in md
    assert "**1.173× faster**" in md and "the bar was 1.03×" in md and "Slower on" not in md
    assert "| `T=1/float16` | 10.00 | 8.00 | 1.250× | 8.10 | 1.0% / 2.0% | 30.0 / 29.0 | 0.25 |" in md
    assert "num_warps 4 -> 8" in md and "2 held-out cases" in md
    assert "with the change: `python -m pytest -q t.py` → **passed**" in md
    assert "1 at compile" in md and "NVIDIA H200" in md and "4100 GB/s" in md


def test_no_improvement_and_not_timed_reports_say_so():
    r = report("no_improvement", timed_eval([1.01, 0.99]), reason="No candidate beat 1.03x.")
    md = render_markdown(r)
    assert "**No improvement found.** No candidate beat 1.03x." in md and "not proposed" in md
    assert "baseline timed against itself" in render_markdown(
        report("no_improvement", timed_eval([1.0, 1.0]), reason="-", shown_kind="baseline"))
    assert "**Slower on 1 of 2 cases**: `T=64/float16` 0.950×" in render_markdown(
        report("improved", timed_eval([1.2, 0.95]), Candidate(3, "src", "tuner", evaluation=timed_eval([1.2, 0.95]))))
    untimed = Evaluation(stage="done", ok=True, cases=[CaseResult("T=1/float16", correct=True, trials=3)],
                         env=Environment(backend="interpret", device="cpu (Triton interpreter)"))
    md = render_markdown(report("not_timed", untimed, reason="The interpreter measures no speed."))
    assert "**No speed was measured.** The interpreter measures no speed." in md
    assert "baseline µs" not in md and "| `T=1/float16` | yes | 3 |" in md


def test_a_candidates_error_text_in_the_reason_pings_nobody_and_loads_nothing():
    """The reason can quote a candidate's failure (its exception text is its own): in the pull-request body its
    @-mentions, HTML and markdown links and images are defused (round 7's review)."""
    bait = ("A candidate looked faster, but it failed: RuntimeError: cc @octocat @org/team "
            "<img src=https://evil.example/p.png> ![x](https://evil.example/q.png) [docs](https://evil.example)")
    md = render_markdown(report("no_improvement", timed_eval([1.01, 0.99]), reason=bait))
    line = next(x for x in md.splitlines() if x.startswith("**No improvement found.**"))
    assert "@octocat" not in line and "@org" not in line and "<img" not in line
    assert "](https://" not in line and "RuntimeError" in line and "evil.example" in line  # shown, inert
