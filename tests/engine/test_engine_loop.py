"""The asynchronous loop: proposals overlap evaluations, one evaluation per device, duplicates cost nothing,
every budget stops the run, and a failing LLM neither crashes nor stalls it."""
import random
import threading
import time

import pytest
from engine_fixtures import RecordedLLM, models_file
from test_engine_archive import SOFTMAX, timed

from evolver.archive import Archive
from evolver.budget import PRESETS, Budget
from evolver.candidate import Candidate
from evolver.llm_operators import LLMOperator
from evolver.loop import Search, SearchConfig
from evolver.prompts import PromptBuilder
from evolver.providers import Ensemble, load_models
from evolver.store import RunStore


class Counter:
    """An operator that proposes numbered variants, slowly, and remembers how many ran at once."""

    name = "counter"

    def __init__(self, delay=0.0, repeat_every=0):
        self.delay, self.repeat_every = delay, repeat_every
        self.n = 0
        self.active = self.peak = 0
        self.lock = threading.Lock()

    def propose(self, archive, rng):
        with self.lock:
            self.n += 1
            n = self.n
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(self.delay)
        with self.lock:
            self.active -= 1
        k = n if not self.repeat_every else n % self.repeat_every
        return Candidate(-1, SOFTMAX + f"\nK = {k}\n", self.name, parent_id=0, genome={"k": k})


class Device:
    def __init__(self, delay=0.0, speed=lambda c: 1.0):
        self.delay, self.speed = delay, speed
        self.active = self.peak = self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, cand):
        with self.lock:
            self.active += 1
            self.calls += 1
            self.peak = max(self.peak, self.active)
        time.sleep(self.delay)
        with self.lock:
            self.active -= 1
        return timed(self.speed(cand))


def archive():
    a = Archive(islands=2)
    base = Candidate(0, SOFTMAX, "baseline")
    base.evaluation = timed(1.0)
    a.add(base)
    return a


def search(budget, op=None, devices=None, in_flight=4, **kw):
    op = op or Counter()
    devices = devices or [Device()]
    s = Search(archive(), [op], devices, SearchConfig(budget, in_flight=in_flight, **kw), random.Random(0))
    return s, s.run(), op, devices


def test_proposals_overlap_evaluations_and_each_device_runs_one_at_a_time():
    devices = [Device(delay=0.05), Device(delay=0.05)]
    s, summary, op, _ = search(Budget(evaluations=12), Counter(delay=0.05), devices, in_flight=6)
    assert summary.evaluated == 12 and summary.stop == "evaluations"
    assert op.peak >= 2  # several proposals in flight at once
    assert all(d.peak == 1 for d in devices) and all(d.calls >= 3 for d in devices)  # both GPUs busy, never twice
    assert len([c for c in s.archive.candidates if c.id]) == 12


def test_duplicates_are_refused_before_evaluation_and_the_space_runs_out():
    device = Device()
    _, summary, _, _ = search(Budget(evaluations=100), Counter(repeat_every=5), [device], max_duplicate_streak=10)
    assert device.calls == 5 == summary.evaluated  # K = 0..4, each evaluated once
    assert summary.duplicates_rejected >= 10 and summary.stop == "exhausted"


@pytest.mark.parametrize("budget,stop", [
    (Budget(rounds=3), "rounds"), (Budget(stagnation=4), "stagnation"), (Budget(wall_s=0.3), "wall-clock")])
def test_budgets_stop_the_run(budget, stop):
    s, summary, _, _ = search(budget, Counter(delay=0.01), [Device(delay=0.02)], in_flight=1, round_size=2)
    assert summary.stop == stop
    if stop == "rounds":
        assert s.n.proposals == 6 and summary.evaluated == 6
    if stop == "stagnation":
        assert summary.evaluated == 4  # nothing ever beats the baseline's 1.0


def test_improvements_reset_stagnation():
    speeds = iter([1.1, 1.0, 1.0, 1.2, 1.0, 1.0, 1.0, 1.0, 1.0])
    s, summary, _, _ = search(Budget(stagnation=3, evaluations=50), Counter(), [Device(speed=lambda c: next(speeds))],
                              in_flight=1)
    assert summary.evaluated == 7 and summary.stop == "stagnation"
    assert s.archive.best().fitness == pytest.approx(1.2)


def llm_search(tmp_path, script, budget, in_flight=2, store=None):
    with RecordedLLM(script) as server:
        ens = Ensemble(load_models(models_file(tmp_path, server.url, timeout_s=1)))
        a = archive()
        builder = PromptBuilder(_Spec(), SOFTMAX, "interpret")
        op = LLMOperator("rewrite", ens, builder, 0.6, 0.95, max_resamples=1)
        device = Device()
        s = Search(a, [op], [device], SearchConfig(budget, in_flight=in_flight, max_rejected_streak=6),
                   random.Random(1), store, ens)
        start = time.monotonic()
        summary = s.run()
        return s, summary, device, time.monotonic() - start, server.requests


class _Spec:
    """Just what the prompt needs of a task spec."""

    kernel, module, entry, args, cases, written = "softmax", "softmax.py", "softmax", [], [], []

    def tolerance(self, dtype):
        return None


def test_token_and_money_budgets_stop_llm_runs(tmp_path):
    script = [{"file": f"softmax/{name}.py"} for name in ("split_rows", "looped", "wrong_axis")]
    _, summary, _, _, _ = llm_search(tmp_path, script, Budget(tokens=3000, evaluations=50))
    assert summary.stop == "tokens" and summary.evaluated >= 1
    _, summary, _, _, _ = llm_search(tmp_path, script, Budget(money=0.004, evaluations=50))
    assert summary.stop == "money"


def test_a_failing_llm_neither_crashes_nor_stalls_the_run(tmp_path):
    script = [{"status": 500}, {"text": "no code here"}, {"delay": 3, "text": "too late"}, {"status": 429}]
    _, summary, device, seconds, requests = llm_search(tmp_path, script, Budget(evaluations=5))
    assert summary.stop == "proposals keep failing" and device.calls == 0 and seconds < 60
    assert summary.rejected_proposals >= 6 and requests


def test_a_working_llm_gets_its_rewrites_evaluated_and_stored(tmp_path):
    store = RunStore(tmp_path / "run.sqlite")
    script = [{"file": "softmax/split_rows.py"}, {"status": 429}, {"text": "```python\ndef broken(:\n```"},
              {"file": "softmax/looped.py"}]
    s, summary, device, _, _ = llm_search(tmp_path, script, Budget(evaluations=2), in_flight=1, store=store)
    assert summary.evaluated == 2 == device.calls
    sources = [c.source for c in s.archive.candidates if c.id]
    assert any("_softmax_partials_kernel" in src for src in sources) and any("LOOPED" in src for src in sources)
    rows = store.rows()
    assert [r["status"] for r in rows].count("evaluated") == 2
    calls = store.call_rows()
    assert any("does not parse" in (c["dynamic"] or "") for c in calls)  # the syntax error was fed back
    assert all(c["temperature"] == PRESETS["kernel-smith"]["temperature"] for c in calls)
    assert s.ensemble.report()[0]["calls"] == len(calls)


def test_an_ensemble_of_both_wire_formats_shares_the_run_and_accounts_per_model(tmp_path):
    import json

    script = [{"file": "softmax/split_rows.py"}, {"file": "softmax/looped.py"}, {"file": "softmax/rows_only.py"},
              {"file": "softmax/split_only.py"}, {"file": "softmax/split_4096.py"}]
    with RecordedLLM(script) as server:
        a = json.loads(models_file(tmp_path, server.url, provider="anthropic").read_text())["models"][0]
        o = json.loads(models_file(tmp_path, server.url, provider="openai", price={"input": 0.1}).read_text())
        path = tmp_path / "both.yaml"
        path.write_text(json.dumps({"models": [a, o["models"][0]]}))
        ens = Ensemble(load_models(path))
        op = LLMOperator("rewrite", ens, PromptBuilder(_Spec(), SOFTMAX, "interpret"), max_resamples=0)
        s = Search(archive(), [op], [Device()], SearchConfig(Budget(evaluations=5, rounds=30), in_flight=3),
                   random.Random(4), None, ens)
        s.run()
        paths = {r["path"] for r in server.requests}
    assert paths == {"/v1/messages", "/v1/chat/completions"}  # both providers were called
    report = {r["model"]: r for r in ens.report()}
    assert report["local-anthropic"]["calls"] + report["local-openai"]["calls"] == len(server.requests)
    assert report["local-anthropic"]["cost"] > 0 and report["local-anthropic"]["input_tokens"] > 0
    assert sum(r["children_evaluated"] for r in report.values()) == s.n.evaluated
