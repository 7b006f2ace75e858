"""The search's pipeline: the next candidate loaded (and on a GPU compiled) in the warm spare while the current one
is judged (runners/sandbox.py ``prefetch``, runners/warm.py), the sampling's early stop while screening
(runners/judge_clock.py ``decided``), and the loop that gives each busy device its next candidate."""
from __future__ import annotations

import random
import time

import pytest
import torch

from evolver.archive import Archive
from evolver.candidate import Candidate
from evolver.loop import Search, SearchConfig
from evolver.budget import Budget
from runners import warm
from runners.sample_stats import decided
from runners.results import CaseResult, Evaluation


def _variant(source: str, tag: str) -> str:
    return f"{source}\n# variant {tag}\n"


def _judged_while_prefetching(evaluator, source: str, seed: int = 3) -> Evaluation:
    """As the search does it: the evaluation in progress is submitted to a thread and the next source is given at
    once, whether or not that evaluation has taken its worker yet (the prefetch waits for it to)."""
    import threading

    got = []
    t = threading.Thread(target=lambda: got.append(evaluator.evaluate(_variant(evaluator.baseline, f"judged {seed}"),
                                                                      seed=seed, trials=1, protocol="search")))
    t.start()
    assert evaluator.prefetch(source)
    assert evaluator.prefetch(source)  # the same source again: still the one
    t.join()
    assert got[0].ok, got[0].error
    return got[0]


def _errors(ev: Evaluation) -> list:
    return [(c.case, c.correct, c.max_abs_err, c.err_ratio, c.trials) for c in ev.cases]


def test_a_prefetched_candidate_is_judged_as_if_it_were_loaded_in_its_turn(rms_evaluator):
    source = _variant(rms_evaluator.baseline, "a")
    plain = rms_evaluator.evaluate(source, seed=7, trials=1, protocol="search")
    _judged_while_prefetching(rms_evaluator, source)
    assert rms_evaluator._prefetch is not None and rms_evaluator._prefetch.source == source
    ahead = rms_evaluator.evaluate(source, seed=7, trials=1, protocol="search")
    assert plain.ok and ahead.ok, (plain.error, ahead.error)
    assert "prefetch" in ahead.phases and "load" not in ahead.phases and "load" in plain.phases
    assert _errors(ahead) == _errors(plain)  # the same trials on the same values, the same verdicts


def test_a_prefetch_for_another_source_is_ended_and_the_evaluation_starts_afresh(rms_evaluator):
    other = _variant(rms_evaluator.baseline, "other")
    _judged_while_prefetching(rms_evaluator, other, seed=4)
    stale = rms_evaluator._prefetch.worker
    source = _variant(rms_evaluator.baseline, "c")
    ev = rms_evaluator.evaluate(source, seed=8, trials=1, protocol="search")
    assert ev.ok and "load" in ev.phases and "prefetch" not in ev.phases, ev.error
    deadline = time.monotonic() + 5
    while stale.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not stale.alive()  # the other source's worker ran no further
    assert rms_evaluator._spare is not None and rms_evaluator._spare is not stale


def test_a_candidate_that_fails_to_import_fails_the_same_way_when_prefetched(rms_evaluator):
    source = rms_evaluator.baseline + "\nraise RuntimeError('broken at import 42')\n"
    plain = rms_evaluator.evaluate(source, seed=9, trials=1, protocol="search")
    _judged_while_prefetching(rms_evaluator, source, seed=5)
    ahead = rms_evaluator.evaluate(source, seed=9, trials=1, protocol="search")
    assert plain.stage == ahead.stage == "compile"
    assert "broken at import 42" in plain.error and "broken at import 42" in ahead.error
    assert plain.error == ahead.error


def test_prefetches_chain_one_loading_and_one_noted(rms_evaluator):
    """While the spare loads one source (the evaluation about to take it was just submitted), the next is noted and
    loaded into the spare that evaluation starts: every candidate of a search arrives prefetched, not every other one
    (the H200's first pipeline run)."""
    a, b, c = (_variant(rms_evaluator.baseline, tag) for tag in ("chain a", "chain b", "chain c"))
    assert rms_evaluator.prefetch(a) and not rms_evaluator.prefetch(b)  # a noted: one noted at a time
    assert rms_evaluator.evaluate(_variant(rms_evaluator.baseline, "chain first"), seed=2, trials=1,
                                  protocol="search").ok
    assert rms_evaluator._prefetch.source == a and rms_evaluator._wanted is None
    assert rms_evaluator.prefetch(b) and not rms_evaluator.prefetch(c)  # a loading, b noted
    ev = rms_evaluator.evaluate(a, seed=2, trials=1, protocol="search")
    assert ev.ok and "prefetch" in ev.phases, ev.phases
    assert rms_evaluator._prefetch.source == b and rms_evaluator._wanted is None
    assert "prefetch" in rms_evaluator.evaluate(b, seed=2, trials=1, protocol="search").phases


def test_a_verification_drops_what_the_search_left_and_the_search_cancels_it(rms_evaluator):
    """A verification (or the held-out cases) never starts or takes a prefetch; ``cancel_prefetch`` ends the search's."""
    noted = _variant(rms_evaluator.baseline, "left by the search")
    assert rms_evaluator.prefetch(noted)
    assert rms_evaluator.evaluate(_variant(rms_evaluator.baseline, "champion"), seed=3, trials=1).ok  # verify
    assert rms_evaluator._prefetch is None and rms_evaluator._wanted is None
    _judged_while_prefetching(rms_evaluator, noted, seed=8)
    loading = rms_evaluator._prefetch.worker
    rms_evaluator.cancel_prefetch()
    assert rms_evaluator._prefetch is None and rms_evaluator._wanted is None and not loading.alive()
    held_out = rms_evaluator.evaluate(noted, seed=3, trials=1, case_set="held_out", protocol="search")
    assert "prefetch" not in held_out.phases


def test_a_source_the_policy_refuses_is_not_prefetched(rms_evaluator):
    source = rms_evaluator.baseline + "\nimport os\nos.system('true')\n"
    assert not rms_evaluator.prefetch(source)
    assert rms_evaluator._prefetch is None and rms_evaluator._wanted is None


def test_a_prefetch_given_before_any_evaluation_waits_for_the_next_one_to_take_its_worker(rms_evaluator):
    """Given while no evaluation holds its worker, the source is only noted; the next evaluation (of another
    source) takes the spare and the new spare loads it; an evaluation of that very source clears the note."""
    source = _variant(rms_evaluator.baseline, "noted")
    assert rms_evaluator.prefetch(source) and rms_evaluator._prefetch is None
    judged = rms_evaluator.evaluate(_variant(rms_evaluator.baseline, "first"), seed=6, trials=1,
                                    protocol="search")
    assert judged.ok and rms_evaluator._prefetch is not None and rms_evaluator._prefetch.source == source
    assert rms_evaluator.evaluate(source, seed=6, trials=1, protocol="search").ok
    again = _variant(rms_evaluator.baseline, "noted again")
    assert rms_evaluator.prefetch(again)
    ev = rms_evaluator.evaluate(again, seed=6, trials=1, protocol="search")
    assert ev.ok and "load" in ev.phases and rms_evaluator._wanted is None and rms_evaluator._prefetch is None


def test_warm_turns_launches_into_compiles_and_tuners_choose_nothing():
    """The compile-only switch (runners/warm.py): a launch becomes Triton's warm-up (compiled, not run) and the
    compiled kernel is loaded as a first launch would load it (its handles made, nothing run), and an autotuner
    compiles each of its configs without benchmarking or recording a choice; off the switch both are untouched."""
    seen, loaded = [], []

    class Compiled:
        def _init_handles(self):
            loaded.append(self)

    kernel = Compiled()

    def run(self, *args, **kwargs):
        seen.append(kwargs.get("warmup"))
        return kernel

    wrapped = warm._jit_run(run)
    assert wrapped(None, 1, grid=(1,), warmup=False) is kernel and seen == [False] and loaded == []
    warm._COMPILE_ONLY = True
    try:
        assert wrapped(None, 1, grid=(1,), warmup=False) is kernel
    finally:
        warm._COMPILE_ONLY = False
    assert seen == [False, True] and loaded == [kernel]

    class Unloadable:  # a kernel that cannot be loaded (too much shared memory): its first launch reports it
        def _init_handles(self):
            raise RuntimeError("out of resources")

    warm._COMPILE_ONLY = True
    try:
        assert isinstance(warm._jit_run(lambda self, *a, **k: Unloadable())(None, grid=(1,), warmup=False), Unloadable)
    finally:
        warm._COMPILE_ONLY = False

    class Fn:
        def __init__(self):
            self.calls = []

        def run(self, *args, **kwargs):
            self.calls.append(kwargs)
            if kwargs.get("BLOCK") == 64:
                raise RuntimeError("out of resources")  # one config fails to compile: the others still are

    class Config:
        def __init__(self, block):
            self.block = block

        def all_kwargs(self):
            return {"BLOCK": self.block}

    class Tuner:
        arg_names = ["x"]
        configs = [Config(16), Config(64), Config(256)]
        cache: dict = {}
        nargs = None

        def __init__(self):
            self.fn = Fn()

        def prune_configs(self, kwargs):
            return self.configs

    def benchmarking_run(self, *args, **kwargs):
        raise AssertionError("benchmarked while compiling only")

    tuner = Tuner()
    warm._COMPILE_ONLY = True
    try:
        assert warm._tuner_run(benchmarking_run)(tuner, "x-tensor", grid=(1,), warmup=False) is None
    finally:
        warm._COMPILE_ONLY = False
    assert [c["BLOCK"] for c in tuner.fn.calls] == [16, 64, 256] and tuner.cache == {} and tuner.nargs is None
    with pytest.raises(AssertionError, match="benchmarked"):
        warm._tuner_run(benchmarking_run)(tuner, "x-tensor", grid=(1,), warmup=False)


def test_screening_stops_sampling_at_a_clear_verdict_only():
    base = [10.0, 10.1, 9.9, 10.0, 10.05, 9.95]
    assert decided(base, [13.0, 13.1, 12.9, 13.2, 13.0, 12.8], 0.03)  # a clear loss
    assert decided(base, [7.0, 7.1, 6.9, 7.2, 7.0, 6.8], 0.03)  # a clear win (the judge's clock still runs)
    assert not decided(base, [10.2, 10.3, 10.1, 10.25, 10.2, 10.15], 0.03)  # apart, but within the margin
    assert not decided(base, [13.0, 9.0, 13.1, 9.2, 13.2, 9.1], 0.03)  # overlapping: sample on
    assert not decided(base, [13.0, 13.1, 12.9, 13.2, 13.0, 12.8], 0.0)  # the full protocol never stops early
    assert not decided(base[:3], [13.0, 13.1, 12.9], 0.03)  # too few samples to tell


class _Device:
    """A device's evaluate callable with a prefetch, as evolver/engine.py's ``SearchEvaluate``."""

    def __init__(self, log: list, slot: int):
        self.log, self.slot = log, slot

    def __call__(self, cand: Candidate) -> Evaluation:
        self.log.append(("evaluate", self.slot, cand.id))
        time.sleep(0.05)
        return Evaluation(stage="done", ok=True, timed=True,
                          cases=[CaseResult("c", correct=True, baseline_us=10.0, candidate_us=10.0)])

    def prefetch(self, cand: Candidate) -> bool:
        self.log.append(("prefetch", self.slot, cand.id))
        return True


class _Batch:
    """Proposes three candidates at once (so that some wait while a device is busy)."""

    name = "batch"

    def __init__(self):
        self.n = 0

    def propose(self, archive, rng):
        self.n += 1
        return Candidate(-1, f"source {self.n}", "batch")


def _search(devices: int, log: list) -> None:
    archive = Archive()
    base = Candidate(0, "source 0", "baseline")
    base.evaluation = Evaluation(stage="done", ok=True, timed=True,
                                 cases=[CaseResult("c", correct=True, baseline_us=10.0, candidate_us=10.0)])
    archive.add(base)
    config = SearchConfig(Budget(evaluations=8), in_flight=4)
    Search(archive, [_Batch()], [_Device(log, k) for k in range(devices)], config, random.Random(1)).run()


def test_the_busy_device_loads_the_next_waiting_candidate_and_then_evaluates_it():
    log: list = []
    _search(1, log)
    evaluated = [cid for op, _, cid in log if op == "evaluate"]
    prefetched = [cid for op, _, cid in log if op == "prefetch"]
    assert len(evaluated) == 8
    assert prefetched == evaluated[1:len(prefetched) + 1] and len(prefetched) >= 6, log  # in order, each once
    for cid in prefetched:
        assert log.index(("prefetch", 0, cid)) < log.index(("evaluate", 0, cid))


def test_with_two_devices_each_candidate_is_given_ahead_once_and_to_one_device():
    log: list = []
    _search(2, log)
    prefetched = [(slot, cid) for op, slot, cid in log if op == "prefetch"]
    assert prefetched and len({cid for _, cid in prefetched}) == len(prefetched), log
    evaluated = {cid: slot for op, slot, cid in log if op == "evaluate"}
    assert len(evaluated) == 8
    # only at the end, with nothing else waiting, may a free device take what another loaded ahead
    assert sum(evaluated.get(cid) == slot for slot, cid in prefetched) >= len(prefetched) - 1, log


def test_a_free_device_takes_what_it_loaded_ahead_and_leaves_what_a_busy_one_loaded():
    search = Search(Archive(), [_Batch()], [_Device([], 0), _Device([], 1), _Device([], 2)],
                    SearchConfig(Budget(evaluations=8)), random.Random(1))
    waiting = [Candidate(k, f"source {k}", "batch") for k in (3, 4, 5, 6)]
    search.pending.extend(waiting)
    ahead = {3: 0, 4: 1, 6: 2}  # device 0 is busy; 1 and 2 are free
    assert search._next_for(1, ahead, [2]).id == 4  # its own, though 3 waits longer
    assert search._next_for(2, ahead, []).id == 6
    assert search._next_for(1, ahead, []).id == 5  # nothing of its own: not the one busy device 0 holds
    assert search._next_for(1, ahead, []).id == 3 and ahead == {} and not search.pending  # only that one is left


def test_a_candidate_worker_gets_the_judges_compiled_hash_tree_kernels(tmp_path):
    """Each candidate user has its own Triton cache; the judge's hash-tree variants are copied into it, and nothing
    else of the judge's cache (the baseline's own kernels stay out)."""
    from runners.hash_tree import seed_cache

    judge = tmp_path / "judge"
    for key, name in (("k1", "_levels_kernel"), ("k2", "_levels_kernel"), ("k3", "_rms_norm_kernel")):
        (judge / key).mkdir(parents=True)
        (judge / key / f"{name}.json").write_text("{}")
        (judge / key / f"{name}.cubin").write_bytes(b"\0" * 8)
    dest = tmp_path / "candidate" / ".triton"
    assert seed_cache(dest, judge) == 2
    assert sorted(p.name for p in dest.iterdir()) == ["k1", "k2"]
    assert (dest / "k2" / "_levels_kernel.cubin").read_bytes() == b"\0" * 8
    assert seed_cache(tmp_path / "other", tmp_path / "missing") == 0
    (judge / "k4").mkdir()  # a new variant compiled by the judge: the folder is listed again
    (judge / "k4" / "_levels_kernel.json").write_text("{}")
    assert seed_cache(tmp_path / "third", judge) == 3


class _Claims:
    """A worker that answers the timing requests with a fixed device time (the judge's side of ``time_case``)."""

    def __init__(self, us: float):
        self.us = us

    def request(self, op, **fields):
        return {"ok": True, "method": "cuda-graph", "per_call_us": self.us, "us": self.us}

    def pause(self):
        pass

    def resume(self):
        pass

    def still_running(self):
        return []


@pytest.mark.parametrize("claimed, clocked", [(1.01, False), (1.05, True), (0.8, False)])
def test_screening_clocks_only_claims_above_its_noise_and_credits_the_rest_parity(rms_bundle, claimed, clocked):
    """Under the search protocol a case is clocked where its claim is above ``clock_above`` (1.02x); a smaller claim of
    a speedup is credited 1.00x unclocked (never more), and a claimed slowdown keeps its claim."""
    from runners.judge import Judge
    from runners.protocol import Protocol
    from runners.task import read_task

    spec = read_task(rms_bundle)
    judge = Judge(spec, None, _Claims(10.0), _Claims(10.0 / claimed), None, "cpu", Protocol.search())
    ran = []
    judge._corroborate = lambda case, index, secret, result: ran.append(index)
    result = CaseResult(case=spec.cases[0].id)
    judge.time_case(spec.cases[0], 0, 1234, result)
    assert bool(ran) == clocked and bool(judge.unclocked) != clocked
    expected = claimed if clocked or claimed < 1 else 1.0
    assert result.speedup == pytest.approx(expected)
    if not clocked and claimed > 1:
        assert result.claimed_us == pytest.approx(10.0 / claimed) and "credited 1.00x" in result.message


def test_the_correctness_phase_says_where_it_goes(rms_evaluator):
    """``correctness.*``: the judge's inputs, the oracle's and the candidate's calls, the comparison, the layout and
    masked trials as wholes; together within the phase itself (the next H200 session reads them)."""
    ev = rms_evaluator.evaluate(_variant(rms_evaluator.baseline, "phases"), seed=21, trials=1,
                                protocol="search")
    assert ev.ok, ev.error
    parts = {k: v for k, v in ev.phases.items() if k.startswith("correctness.")}
    assert {"correctness.inputs", "correctness.oracle", "correctness.candidate", "correctness.compare",
            "correctness.layout"} <= set(parts), ev.phases
    dense = sum(v for k, v in parts.items() if k not in ("correctness.layout", "correctness.masked"))
    assert 0 < dense + parts["correctness.layout"] + parts.get("correctness.masked", 0.0) <= ev.phases["correctness"]


def _classes(kwargs: dict) -> tuple:
    """What Triton specialises a launch on, for the layouts: each tensor's strides divisible by 16 or not."""
    return tuple((n, tuple(s % 16 == 0 for s in t.stride())) for n, t in sorted(kwargs.items())
                 if isinstance(t, torch.Tensor))


@pytest.mark.parametrize("shapes", [{"x": (4, 64), "residual": (4, 64), "weight": (64,)},
                                    {"q": (3, 4, 32), "k": (3, 4, 32)}])
def test_compiling_ahead_covers_every_stride_class_the_layout_trial_draws(shapes):
    """The layout trial's padded rows (runners/layouts.py ``row_padded``, pads drawn per trial) are new
    specialisations of every kernel that takes the strides; ``warm_layouts`` gives one empty input per class, so that
    whatever the trial draws was compiled ahead (runners/warm.py)."""
    from runners.layouts import row_padded, warm_layouts

    dense = {n: torch.zeros(s, dtype=torch.float16) for n, s in shapes.items()}
    dense["eps"] = 1e-6
    variants = warm_layouts(dense)
    warmed = {_classes(v) for v in variants}
    assert all(v["eps"] == 1e-6 and all(v[n].shape == dense[n].shape for n in shapes) for v in variants)
    drawn = set()
    for seed in range(60):
        gen = torch.Generator().manual_seed(seed)
        for every_level in (False, True):
            wide, changed = row_padded(dense, gen=gen, every_level=every_level, spread=bool(seed % 2))
            if changed:
                drawn.add(_classes(wide))
    assert drawn <= warmed, drawn - warmed
    assert len(warmed) >= 4  # both classes for each padded tensor, in both combinations
