"""Captured cases replay the integer tensors the repository's tests passed (token ids that must be rows of the
table), instead of drawing them from low..high: in the judge's inputs, in the workers' timing slots, and in the
bundle that carries them to an evaluation."""
import base64
import dataclasses
import json
import logging
import re
import shutil

import git
import pytest
import torch
import yaml
from conftest import ROOT, commit_all

from bot.capture import captured_cases, run_capture
from bot.config import parse_config, task_spec
from bot.optimize import OptimizeOptions, optimize
from bot.repo_tests import TestSettings
from bot.target import open_target
from runners.inputs import SlotBank, make_inputs
from runners.recorded import RecordedError
from runners.sandbox import Evaluator
from runners.task import TASK_FILE, Case, read_task, write_task

SGLITE = ROOT / "examples" / "sglite"
MODULE = "sglite.srt.layers.vocab.embedding_lookup"
KERNEL = parse_config((SGLITE / ".github/kernelsmith.yml").read_text()).kernels["embedding_lookup"]
KERNEL_ARGS = task_spec("embedding_lookup", KERNEL, "interpret").args
# the ids examples/sglite/test/srt/test_embedding_lookup.py passes, by the size of its table
TEST_IDS = {100: [0, 5, 99, 5, 42, 7, 98], 50: [1, 0, 49, 3], 8: [3, 2, 1]}


def _repo(tmp_path):
    dest = tmp_path / "sglite"
    shutil.copytree(SGLITE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    commit_all(git.Repo.init(dest, initial_branch="main"), "baseline")
    return dest


def _capture(repo):
    target = open_target(repo)
    target.tests = TestSettings(import_roots=["python"])
    capture = run_capture(target, "test/srt/test_embedding_lookup.py", MODULE, "embedding_lookup", "interpret")
    assert capture.run.passed and capture.installed, capture.run.output_tail
    return capture


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return _capture(_repo(tmp_path_factory.mktemp("values")))


@pytest.fixture(scope="module")
def cases(capture):
    cases, summary = captured_cases(capture.calls, KERNEL, "interpret", 6, [])
    assert summary["replayed"] == ["input_ids"] and summary["replayed_cases"] == 3 and summary["not_replayed"] == {}
    return cases


def _ids(case: Case) -> list[int]:
    return TEST_IDS[case.symbols["V"]]


def test_capture_records_the_values_of_integer_tensors(capture):
    assert len(capture.calls) == 3 and capture.value_files == 3 and capture.values_skipped == 0
    for call in capture.calls:
        ids, weight = call["args"]["input_ids"], call["args"]["weight"]
        recorded = torch.frombuffer(bytearray(base64.b64decode(ids["values"]["data"])),
                                    dtype=torch.int32)
        assert recorded.tolist() == TEST_IDS[weight["shape"][0]] and ids["values"]["shape"] == ids["shape"]
        assert "values" not in weight  # floating tensors stay fresh from the judge's seed


def test_a_captured_case_replays_the_values_in_every_trial_and_slot(cases):
    assert all(c.origin == "captured" and c.id.endswith("input_ids:recorded/float16") for c in cases)
    for case in cases:
        weights = []
        for seed, trial in ((1, 0), (2, 1), (3, 2)):
            kwargs = make_inputs(KERNEL_ARGS, case, "cpu", seed, trial)
            assert kwargs["input_ids"].dtype == torch.int32 and kwargs["input_ids"].tolist() == _ids(case)
            weights.append(kwargs["weight"])
        assert not torch.equal(weights[0], weights[1])  # floating inputs still come from the seed
        # the judge sends the case as JSON; each worker builds its slot bank from it
        sent = Case(**json.loads(json.dumps(dataclasses.asdict(case))))
        banks = [SlotBank(KERNEL_ARGS, sent, "cpu", 3) for _ in range(2)]
        banks[0].fill(11)
        banks[1].fill(12)
        for bank in banks:
            assert all(slot["input_ids"].tolist() == _ids(case) for slot in bank.slots)
        assert not torch.equal(banks[0].slots[0]["weight"], banks[1].slots[0]["weight"])
        banks[0].slots[1]["input_ids"].fill_(-5)  # a kernel that scribbled on its ids gets them back on a refill
        banks[0].fill(13)
        assert banks[0].slots[1]["input_ids"].tolist() == _ids(case)


def test_configured_cases_still_draw_from_low_high():
    case = Case(symbols={"T": 6, "V": 1024, "H": 8}, dtype="float16")
    draws = [make_inputs(KERNEL_ARGS, case, "cpu", seed)["input_ids"] for seed in (1, 2)]
    assert not torch.equal(*draws) and all(0 <= int(d.min()) and int(d.max()) < 1024 for d in draws)


def test_the_bundle_carries_the_values_as_raw_bytes(cases, tmp_path):
    from runners.task import TaskSpec

    spec = TaskSpec(kernel="k", module="m.py", entry="embedding_lookup", args=KERNEL_ARGS, cases=cases[:2],
                    held_out=cases[2:])
    write_task(tmp_path, spec)
    task = yaml.safe_load((tmp_path / TASK_FILE).read_text())
    stored = task["cases"][0]["recorded"]["input_ids"]
    assert "data" not in stored and stored["file"] == f"recorded/{stored['sha256']}.bin"
    raw = (tmp_path / stored["file"]).read_bytes()
    assert torch.frombuffer(bytearray(raw), dtype=torch.int32).tolist() == _ids(cases[0])
    again = read_task(tmp_path)
    assert [c.recorded for c in again.cases + again.held_out] == [c.recorded for c in cases]
    (tmp_path / stored["file"]).write_bytes(raw[:-4] + b"\x00\x00\x00\x00")
    with pytest.raises(RecordedError, match="bytes|digest"):
        read_task(tmp_path)


CHECKED = '''
_TEST_IDS = {test_ids!r}


def embedding_lookup(input_ids, weight):
    if weight.shape[0] in _TEST_IDS and input_ids.tolist() != _TEST_IDS[weight.shape[0]]:
        raise ValueError(f"the candidate got ids {{input_ids.tolist()}}")
    return _embedding_lookup(input_ids, weight)
'''


def _candidate(baseline: str, test_ids: dict) -> str:
    return baseline.replace("def embedding_lookup(", "def _embedding_lookup(") + CHECKED.format(test_ids=test_ids)


def test_optimize_checks_the_baseline_on_the_replayed_ids(tmp_path):
    """kernelsmith optimize on the interpreter: the captured cases pass the baseline check with the tests' ids,
    and a candidate worker gets exactly the ids the oracle gets; without the replay the baseline fails."""
    repo = _repo(tmp_path)
    out = tmp_path / "run"
    result = optimize(OptimizeOptions(target=repo, kernel="embedding_lookup", out=out, budget=1,
                                      backend="interpret", timeout=240, trials=2))
    assert result.verdict == "not_timed"
    bundle = out / "bundle"
    task = yaml.safe_load((bundle / TASK_FILE).read_text())
    captured = [c for c in task["cases"] if c["origin"] == "captured"]
    assert sorted(c["symbols"]["V"] for c in captured) == [8, 50, 100]
    assert all((bundle / c["recorded"]["input_ids"]["file"]).is_file() for c in captured)
    assert task["captured"]["replayed"] == ["input_ids"] and task["captured"]["not_replayed"] == {}
    rows = [json.loads(line) for line in (out / "candidates.jsonl").read_text().splitlines()]
    assert rows[0]["operator"] == "baseline" and rows[0]["evaluation"]["ok"], rows[0]["evaluation"]["error"]
    assert {r["case"] for r in rows[0]["evaluation"]["cases"]} >= {
        "T=7,V=100,H=64,input_ids:recorded/float16", "T=4,V=50,H=96,input_ids:recorded/float16"}

    with Evaluator(bundle, "interpret", timeout=120, trials=1) as evaluator:
        # oracle and candidate get the same ids: the candidate checks them, and its outputs (rows of a random
        # table) match the oracle's only if the oracle looked up the same rows
        ok = evaluator.evaluate(_candidate(evaluator.baseline, TEST_IDS), 5, time_it=False)
    assert ok.ok and all(c.correct for c in ok.cases), ok.error
    # the candidate's check ran: every table size of the tests was a case
    assert {int(c.case.split("V=")[1].split(",")[0]) for c in ok.cases} >= set(TEST_IDS)

    for case in task["cases"]:  # the same bundle without the replay: captured cases draw from the config's 0..1024
        case.pop("recorded", None)
    (bundle / TASK_FILE).write_text(yaml.safe_dump(task, sort_keys=False))
    with Evaluator(bundle, "interpret", timeout=120, trials=1) as evaluator:
        drawn = evaluator.evaluate(evaluator.baseline, 5, time_it=False)
    assert not drawn.ok and drawn.stage == "baseline" and "token id out of range" in drawn.error
    table = re.search(r"the embedding table has (\d+) rows", drawn.error)
    assert table and int(table.group(1)) in TEST_IDS  # a captured case's table, too small for 0..1024



def _call(ids: torch.Tensor, vocab: int = 100) -> dict:
    from runners.recorded import entry

    raw = ids.numpy().tobytes()
    return {"args": {"input_ids": {"kind": "tensor", "shape": list(ids.shape), "dtype": str(ids.dtype)[6:],
                                   "contiguous": True, "stride": [1], "values": entry(str(ids.dtype)[6:],
                                                                                     list(ids.shape), raw)},
                     "weight": {"kind": "tensor", "shape": [vocab, 64], "dtype": "float16", "contiguous": True,
                                "stride": [64, 1]}}}


def test_values_of_another_integer_dtype_replay_when_they_fit(monkeypatch):
    import bot.capture

    fits = _call(torch.tensor([1, 99, 3], dtype=torch.int64))
    too_big = _call(torch.tensor([1, 1 << 40], dtype=torch.int64))
    cases, summary = captured_cases([fits, too_big], KERNEL, "interpret", 6, [])
    replayed = next(c for c in cases if c.recorded)
    assert make_inputs(KERNEL_ARGS, replayed, "cpu", 0)["input_ids"].tolist() == [1, 99, 3]
    assert make_inputs(KERNEL_ARGS, replayed, "cpu", 0)["input_ids"].dtype == torch.int32  # the config's dtype
    assert summary["not_replayed"] == {
        "`input_ids`: the test passed int64 values that int32 (the config's dtype) cannot hold": 1}
    monkeypatch.setattr(bot.capture, "CASE_MAX_BYTES", 16)
    _, summary = captured_cases([fits], KERNEL, "interpret", 6, [])
    assert summary["not_replayed"] == {"`input_ids`: 24 bytes, over the 16 replayed per case": 1}


def test_values_over_a_bound_are_drawn_and_said_once(caplog):
    skipped = _call(torch.tensor([1, 2, 3, 4, 5, 6, 7], dtype=torch.int32))
    skipped["args"]["input_ids"]["values"] = {"skipped": "7 elements, over the 4 recorded per tensor"}
    other = json.loads(json.dumps(skipped))
    other["args"]["weight"]["shape"] = [50, 64]
    with caplog.at_level(logging.WARNING, logger="kernelsmith.capture"):
        cases, summary = captured_cases([skipped, other, skipped], KERNEL, "interpret", 6, [])
    assert [c.recorded for c in cases] == [{}, {}] and [c.id for c in cases] == [
        "T=7,V=50,H=64/float16", "T=7,V=100,H=64/float16"]
    assert summary["not_replayed"] == {"`input_ids`: 7 elements, over the 4 recorded per tensor": 2}
    assert [r.message for r in caplog.records if r.name == "kernelsmith.capture"] == [
        "capture: 2 captured case(s) draw `input_ids` from low..high instead of replaying the tests' values "
        "(7 elements, over the 4 recorded per tensor)"]


def test_the_recorder_bounds_elements_per_tensor_and_bytes_per_run(tmp_path, monkeypatch):
    from runners import capture_plugin

    monkeypatch.setenv("KS_CAPTURE_VALUES", str(tmp_path))
    monkeypatch.setenv("KS_CAPTURE_VALUE_ELEMENTS", "4")
    monkeypatch.setenv("KS_CAPTURE_VALUE_BYTES", "20")
    monkeypatch.setattr(capture_plugin, "_STATE", {**capture_plugin._STATE, "value_files": {}, "value_bytes": 0,
                                                   "values_skipped": 0})
    args = {"long": torch.arange(7, dtype=torch.int32), "ids": torch.tensor([3, 1, 2], dtype=torch.int32),
            "mask": torch.tensor([True, False]), "x": torch.randn(3), "more": torch.tensor([9, 9], dtype=torch.int64)}
    described = {n: capture_plugin._describe(v) for n, v in args.items()}
    stored = capture_plugin._with_values(described, capture_plugin._snapshot(args))
    assert stored["long"]["values"] == {"skipped": "7 elements, over the 4 recorded per tensor"}
    assert (tmp_path / stored["ids"]["values"]["file"]).read_bytes() == args["ids"].numpy().tobytes()
    assert (tmp_path / stored["mask"]["values"]["file"]).read_bytes() == b"\x01\x00"
    assert "values" not in stored["x"]  # a floating tensor
    assert stored["more"]["values"] == {"skipped": "the run's 20 bytes of recorded values were used up"}  # 12+2+16
    assert capture_plugin._STATE["values_skipped"] == 2 and capture_plugin._STATE["value_bytes"] == 14
