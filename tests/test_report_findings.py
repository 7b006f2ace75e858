"""The report's sections for real repositories: the capture run's cases and the tuner's autotune findings."""
from types import SimpleNamespace

from test_launch_params import AUTOTUNED

from bot.report import build_report, render_markdown
from evolver.archive import Archive
from evolver.candidate import Candidate
from evolver.operators import LaunchTuner
from runners.results import CaseResult, Environment, Evaluation
from runners.task import Case, TaskSpec

SPEC = TaskSpec(kernel="norm", module="pkg/norm.py", entry="norm", args=[],
                cases=[Case({"T": 1}, "float16"), Case({"T": 8192}, "float16")])


def tuned(i, genome, times):
    cases = [CaseResult(case=c, correct=True, trials=3, baseline_us=b, candidate_us=t)
             for c, (b, t) in times.items()]
    return Candidate(id=i, source="", operator="tuner", genome=genome,
                     evaluation=Evaluation(stage="done", ok=True, timed=True, cases=cases))


def report(capture=None, autotune=None, scales=(None, None)):
    shown = Evaluation(stage="done", ok=True, cases=[CaseResult(c.id, correct=True, trials=3, output_scale=x)
                                                     for c, x in zip(SPEC.cases, scales)],
                       env=Environment(backend="interpret", device="cpu (Triton interpreter)"))
    return build_report(spec=SPEC, backend="triton", verdict="not_timed", reason="-", shown=shown,
                        champion=None, changes=[], archive=Archive(),
                        search={"budget": 4, "evaluated": 4, "failures": 0, "duplicates_rejected": 0,
                                "exhausted": False, "best_fitness": 1.0, "knobs": []},
                        repo_test=None, baseline_repo_test=None, trials=3, held_out_cases=0,
                        target={"commit": "a" * 40, "module": SPEC.module}, reproduce="kernelsmith optimize x",
                        notes=[], capture=capture, autotune=autotune)


def findings(*candidates):
    return LaunchTuner(AUTOTUNED, entry="norm").autotune_findings(SimpleNamespace(candidates=list(candidates)))


def test_the_report_shows_how_many_calls_were_recorded_and_kept():
    capture = {"calls": 605, "distinct": 121, "kept": 6, "limit": 6, "configured": 2,
               "skipped": {"too large or bf16 for the CPU interpreter": 40}, "written_by_tests": ["x", "y"],
               "undeclared_written": ["y"], "plugin_error": None, "cuda_moved": 1210,
               "test": "python -m pytest -q tests/test_norm.py"}
    r = report(capture=capture)
    md = render_markdown(r)
    assert r["capture"]["kept"] == 6
    assert ("`python -m pytest -q tests/test_norm.py` called the entry 605 times (121 distinct calls that fit "
            "`args`); 6 were kept as cases (at most 6, spread from the smallest call to the largest), beside 2 "
            "configured cases. Left out: 40 (too large or bf16 for the CPU interpreter).") in md
    assert "write `y`, which `written:` does not list" in md
    assert "1210 tensor placements on `cuda` in the tests were made on the CPU" in md
    plain = render_markdown(report())
    assert "Cases from the repository's own tests" not in plain and "Autotuned kernels" not in plain
    assert "\n\n\n\n" not in plain and "\n### Search" in plain


def test_a_key_blind_autotuner_is_reported_with_the_re_key_that_fixed_it():
    configs, key = LaunchTuner(AUTOTUNED, entry="norm").knobs
    small = tuned(1, {configs.key: 1}, {"T=1/float16": (2.0, 1.9), "T=8192/float16": (40.0, 60.0)})
    large = tuned(2, {configs.key: 4}, {"T=1/float16": (2.0, 2.6), "T=8192/float16": (40.0, 25.0)})
    rekeyed = tuned(3, {key.key: 1}, {"T=1/float16": (2.0, 1.95), "T=8192/float16": (40.0, 26.0)})
    [f] = findings(small, large, rekeyed)
    assert f["key_blind"] and f["keys_tried"] == {"['N', 'M_bucket'] (re-tune per power of two of M)": round(
        ((2.0 / 1.95) * (40.0 / 26.0)) ** 0.5, 3)}
    assert "re-keyed as ['N', 'M_bucket'] (re-tune per power of two of M) it measured 1.26x" in f["note"]
    md = render_markdown(report(autotune=[f]))
    assert "### Autotuned kernels" in md and "- `_norm` (line 11, key `['N']`): the best config differs" in md
    assert "| `T=8192/float16` | BLOCK=256, num_warps=8 | 1.600× |" in md
    assert "| `T=1/float16` | BLOCK=64, num_warps=2 | 1.053× |" in md


def test_without_a_helpful_key_the_finding_proposes_a_choice_by_shape():
    configs, key = LaunchTuner(AUTOTUNED, entry="norm").knobs
    small = tuned(1, {configs.key: 1}, {"T=1/float16": (2.0, 1.9), "T=8192/float16": (40.0, 60.0)})
    large = tuned(2, {configs.key: 4}, {"T=1/float16": (2.0, 2.6), "T=8192/float16": (40.0, 25.0)})
    [f] = findings(small, large)  # no re-keyed candidate evaluated yet
    assert f["keys_tried"] == {} and "keys to try: ['N', 'M_bucket'] (re-tune per power of two of M), ['N', 'M']" \
        in f["note"]
    useless = tuned(3, {key.key: 1}, {"T=1/float16": (2.0, 2.0), "T=8192/float16": (40.0, 40.0)})
    [f] = findings(small, large, useless)
    assert "keys to try: ['N', 'M'] (re-tune per value of M)" in f["note"]  # the bucketed key did not help
    exact = tuned(5, {key.key: 2}, {"T=1/float16": (2.0, 2.0), "T=8192/float16": (40.0, 40.0)})
    [f] = findings(small, large, useless, exact)
    assert "choose the config by shape in the launcher (T=1/float16: BLOCK=64, num_warps=2, " \
           "T=8192/float16: BLOCK=256, num_warps=8)" in f["note"]
    same = tuned(4, {configs.key: 1}, {"T=1/float16": (2.0, 1.9), "T=8192/float16": (40.0, 39.0)})
    [f] = findings(same)  # one pinned config timed (the H200's QK-norm run): nothing to compare it with
    assert not f["differs"] and f["pinned_tried"] == 1
    assert "only one pinned config was timed (BLOCK=64, num_warps=2)" in render_markdown(report(autotune=[f]))
    slower = tuned(6, {configs.key: 4}, {"T=1/float16": (2.0, 2.6), "T=8192/float16": (40.0, 45.0)})
    [f] = findings(same, slower)
    assert not f["differs"] and "one config is best on every case (BLOCK=64, num_warps=2)" in render_markdown(
        report(autotune=[f]))


def test_an_atol_above_the_outputs_magnitude_is_a_finding():
    """A softmax over 32000 columns has outputs near 3e-5: an atol of 1e-3 there accepts any output at all."""
    r = report(scales=(3.1e-5, 0.2))
    assert [t["case"] for t in r["correctness"]["loose_tolerances"]] == ["T=1/float16"]
    md = render_markdown(r)
    assert "### Tolerances" in md and "`T=1/float16` (atol 0.001, median |output| 3.1e-05)" in md
    assert "### Tolerances" not in render_markdown(report(scales=(0.5, 0.2)))


def test_the_judge_records_the_outputs_scale():
    import torch

    from runners.compare import output_scale

    assert output_scale((torch.full((4, 8), 3e-5), torch.arange(4))) == torch.tensor(3e-5).item()
    assert output_scale(torch.tensor([1.0, float("nan"), -2.0, 4.0])) == 2.0
    assert output_scale(torch.arange(3)) is None


def test_the_report_says_which_integer_tensors_were_replayed():
    capture = {"calls": 4, "distinct": 3, "kept": 3, "limit": 6, "configured": 1, "skipped": {},
               "written_by_tests": [], "undeclared_written": [], "plugin_error": None, "cuda_moved": 0,
               "test": "python -m pytest -q test/test_vocab.py", "replayed": ["input_ids"], "replayed_cases": 2,
               "not_replayed": {"over 2^20 elements": 1}}
    md = render_markdown(report(capture=capture))
    assert "Integer tensors replayed from the tests' calls: `input_ids` (2 of 3 captured cases)." in md
    assert "Drawn from `low`..`high` instead of replayed: over 2^20 elements (1 case)." in md
