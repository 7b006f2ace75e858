"""A captured case keeps the integer values of other calls the tests made at it (``Case.variants``): later trials
and the timing slots rotate through them, so that a kernel that keeps what it derived from one call's routing is
wrong on the next call, as it would be for every real caller (tests/test_judge_attacks_round4.py)."""
import dataclasses
import json

import pytest
import torch
from conftest import ROOT

from bot.capture import captured_cases
from bot.config import parse_config, task_spec
from runners import recorded
from runners.inputs import SlotBank, make_inputs
from runners.task import Case, read_task, write_task

KERNEL = parse_config((ROOT / "examples/sglite/.github/kernelsmith.yml").read_text()).kernels["embedding_lookup"]
ARGS = task_spec("embedding_lookup", KERNEL, "interpret").args


def _call(ids: list[int], vocab: int = 100) -> dict:
    raw = torch.tensor(ids, dtype=torch.int32).numpy().tobytes()
    return {"args": {"input_ids": {"kind": "tensor", "shape": [len(ids)], "dtype": "int32", "contiguous": True,
                                   "stride": [1], "values": recorded.entry("int32", [len(ids)], raw)},
                     "weight": {"kind": "tensor", "shape": [vocab, 64], "dtype": "float16", "contiguous": True,
                                "stride": [64, 1]}}}


CALLS = [[0, 5, 99], [7, 7, 1], [42, 3, 8], [0, 5, 99], [11, 12, 13], [1, 2, 3]]


@pytest.fixture(scope="module")
def case() -> Case:
    cases, summary = captured_cases([_call(ids) for ids in CALLS], KERNEL, "interpret", 6, [])
    assert len(cases) == 1, [c.id for c in cases]  # every call has one shape: one case
    assert summary["replayed_calls"] == 1 + recorded.MAX_VARIANTS
    return cases[0]


def _ids(kwargs) -> list[int]:
    return kwargs["input_ids"].tolist()


def test_the_other_calls_at_a_case_become_its_variants(case):
    # the first call makes the case; the repeat of it is not a variant; at most MAX_VARIANTS others are kept
    assert [recorded.tensor(v["input_ids"], torch.int32, "cpu").tolist() for v in case.variants] == CALLS[1:3] + [
        CALLS[4]]


def test_trials_rotate_through_the_recorded_calls(case):
    seen = [_ids(make_inputs(ARGS, case, "cpu", seed=trial, trial=trial)) for trial in range(5)]
    assert seen == [CALLS[0], CALLS[1], CALLS[2], CALLS[4], CALLS[0]]


def test_every_slot_holds_another_call_after_a_fill_than_when_the_bank_was_made(case):
    sent = Case(**json.loads(json.dumps(dataclasses.asdict(case))))  # as the judge sends it to a worker
    bank = SlotBank(ARGS, sent, "cpu", 6)
    made = [_ids(slot) for slot in bank.slots]
    assert made == [CALLS[0], CALLS[1], CALLS[2], CALLS[4], CALLS[0], CALLS[1]]
    for seed in (3, 4, 5, 6):
        bank.fill(seed)
        now = [_ids(slot) for slot in bank.slots]
        assert all(a != b for a, b in zip(made, now)), (seed, now)
        other = SlotBank(ARGS, sent, "cpu", 6)  # the other worker's bank, filled from the same seed
        other.fill(seed)
        assert [_ids(slot) for slot in other.slots] == now


def test_the_bundle_carries_the_variants(case, tmp_path):
    spec = task_spec("embedding_lookup", KERNEL, "interpret")
    spec.cases = [case]
    write_task(tmp_path, spec)
    back = read_task(tmp_path).cases[0]
    assert [v["input_ids"]["sha256"] for v in back.variants] == [v["input_ids"]["sha256"] for v in case.variants]
    assert all((tmp_path / "recorded" / f"{v['input_ids']['sha256']}.bin").is_file() for v in case.variants)
    assert [_ids(make_inputs(ARGS, back, "cpu", 1, t)) for t in range(4)] == [CALLS[0], CALLS[1], CALLS[2], CALLS[4]]


def _values(ids: list[int]) -> dict:
    return _call(ids)["args"]["input_ids"]["values"]


def test_a_variant_must_match_the_case(monkeypatch):
    base = Case(symbols={"T": 3}, dtype="float16", recorded={"input_ids": _values([1, 2, 3])})
    assert not recorded.add_variant(base, {"input_ids": _values([1, 2])})  # another shape
    assert not recorded.add_variant(base, {"ids": _values([4, 5, 6])})  # another argument
    assert not recorded.add_variant(base, {"input_ids": _values([1, 2, 3])})  # the same values
    monkeypatch.setattr(recorded, "CASE_MAX_BYTES", 20)  # two sets of 12 bytes: over
    assert not recorded.add_variant(base, {"input_ids": _values([4, 5, 6])})
    assert base.variants == []
    monkeypatch.setattr(recorded, "CASE_MAX_BYTES", 24)
    assert recorded.add_variant(base, {"input_ids": _values([4, 5, 6])})
