"""Training data: SFT keeps the steps that stayed correct and beat their parent, RL records carry the
reward (speedup over the parent, 0 unless correct); chat format, deduplicated, one file per task."""
import json
import random

from engine_fixtures import RecordedLLM, models_file
from test_engine_archive import SOFTMAX, timed
from test_engine_loop import _Spec

from evolver.archive import Archive
from evolver.budget import Budget
from evolver.candidate import Candidate
from evolver.export import export
from evolver.llm_operators import LLMOperator
from evolver.loop import Search, SearchConfig
from evolver.prompts import PromptBuilder
from evolver.providers import Ensemble, load_models
from evolver.store import RunStore

SPEEDS = {"_softmax_partials_kernel": 1.3, "LOOPED": 0.9}


def device(cand):
    if "tl.max(x, axis=0)[None, :]" in cand.source:
        return timed(None, ok=False)
    return timed(next((s for k, s in SPEEDS.items() if k in cand.source), 1.0))


def make_run(tmp_path, name, task):
    run = tmp_path / name
    run.mkdir()
    store = RunStore(run / "run.sqlite")
    store.put("task", task)
    script = [{"file": "softmax/split_rows.py"}, {"file": "softmax/looped.py"}, {"text": "nothing"},
              {"file": "softmax/wrong_axis.py"}]
    with RecordedLLM(script) as server:
        ens = Ensemble(load_models(models_file(run, server.url)))
        archive = Archive(islands=1)
        base = Candidate(0, SOFTMAX, "baseline")
        base.evaluation = timed(1.0)
        archive.add(base)
        store.add_candidate(base, "evaluated")
        op = LLMOperator("rewrite", ens, PromptBuilder(_Spec(), SOFTMAX, "interpret"), max_resamples=0)
        Search(archive, [op], [device], SearchConfig(Budget(evaluations=3), in_flight=1), random.Random(2),
               store, ens).run()
    store.close()
    return run


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sft_and_rl_exports(tmp_path):
    run = make_run(tmp_path, "a", "softmax")
    counts = export([run], "sft", tmp_path / "out")
    sft = read(tmp_path / "out" / "softmax.sft.jsonl")
    assert counts == {"softmax": len(sft)} and len(sft) == 1
    (rec,) = sft
    assert [m["role"] for m in rec["messages"]] == ["system", "user", "assistant"]
    assert "_softmax_partials_kernel" in rec["messages"][2]["content"]
    assert abs(rec["metadata"]["speedup_over_parent"] - 1.3) < 1e-9

    export([run], "rl", tmp_path / "out")
    rl = read(tmp_path / "out" / "softmax.rl.jsonl")
    rewards = sorted(round(r["reward"], 6) for r in rl)
    assert rewards[-2:] == [0.9, 1.3] and rewards.count(0.0) == len(rl) - 2 >= 2  # no code, wrong: 0
    assert all(r["prompt"][0]["role"] == "system" and r["prompt"][1]["role"] == "user" for r in rl)
    wrong = next(r for r in rl if "tl.max(x, axis=0)[None, :]" in r["response"])
    assert wrong["reward"] == 0 and wrong["metadata"]["correct"] is False
    assert {r["metadata"]["prompt"] for r in rl} <= {"rewrite", "diff"} and wrong["metadata"]["prompt"]


def test_exports_are_deduplicated_and_split_by_task(tmp_path):
    a = make_run(tmp_path, "a", "softmax")
    b = make_run(tmp_path, "b", "softmax")  # the same answers to the same prompts
    c = make_run(tmp_path, "c", "rms_norm")
    counts = export([a, b, c], "rl", tmp_path / "out")
    single = export([a], "rl", tmp_path / "single")
    assert counts["softmax"] == single["softmax"] and set(counts) == {"softmax", "rms_norm"}
    assert (tmp_path / "out" / "rms_norm.rl.jsonl").exists()
    softmax_prompts = {json.dumps(r["prompt"]) for r in read(tmp_path / "out" / "softmax.rl.jsonl")}
    assert len(softmax_prompts) >= 1
