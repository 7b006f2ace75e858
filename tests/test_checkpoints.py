"""The judge's checkpoints between the calls of its window's pass (runners/checkpoints.py), on the CPU: what a trace
reads and when, what a link writes, where they are drawn, what the digest binds, and what the judge makes of them.
Through the judge: tests/test_judge_attacks_round4.py (work deferred to a later call, work done ahead of its call)."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from runners import checkpoints
from runners.checkpoints import Checkpoints
from runners.commitments import digest
from runners.corroboration import corroborate
from runners.inputs import SlotBank
from runners.protocol import Protocol
from runners.task import ArgSpec, Case, Tolerance
from runners.timing import GRAPH_SLOTS

ARGS = [ArgSpec("x", shape=["T", "H"]), ArgSpec("w", shape=["H"]), ArgSpec("ids", shape=["T"], dtype="int64",
                                                                              low=0, high=9)]
CASE = Case(symbols={"T": 3, "H": 40}, dtype="float32")
TOL = Tolerance(atol=1e-5, rtol=1e-5)


def _scale(x, w, ids):
    return x * w, ids + 1


def _pass(bank: SlotBank, checks: Checkpoints, fn=_scale) -> list:
    outs = []
    for k, slot in enumerate(bank.slots):
        outs.append(fn(**slot))
        checks.after(k, outs[k])
    return outs


def _bank(count: int = 10, seed: int = 1) -> SlotBank:
    bank = SlotBank(ARGS, CASE, "cpu", count, per_slot_scales=False)
    bank.fill(seed)
    return bank


def _checks(bank: SlotBank, at=(1, 4, 9), link: str | None = "x") -> Checkpoints:
    return Checkpoints(bank.slots, list(at), 8, link)


def _filled(bank: SlotBank, checks: Checkpoints, seed: int) -> None:
    bank.fill(seed)
    checks.fill(seed, bank.blocks, bank.numels)


def test_a_trace_reads_each_output_of_its_call_at_positions_drawn_from_the_seed():
    bank = _bank()
    checks = _checks(bank, link=None)
    _pass(bank, checks)  # the first pass (the capture) learns the outputs' sizes
    _filled(bank, checks, 5)
    outs = _pass(bank, checks)
    floats, ints = checks.traces()
    assert floats.shape == (3, 8) and floats.dtype == torch.float32 and ints.dtype == torch.int64
    for i, k in enumerate(checks.at):
        assert torch.equal(floats[i], outs[k][0].reshape(-1)[checks.positions[i, 0]])
        assert torch.equal(ints[i], outs[k][1].reshape(-1)[checks.positions[i, 1]])
    assert checks.layout() == [[k, j, n] for k in (1, 4, 9) for j, n in ((0, 120), (1, 3))]
    before = checks.positions.clone()
    _filled(bank, checks, 5)
    assert torch.equal(checks.positions, before)  # the same seed, the same positions (both workers agree)
    _filled(bank, checks, 6)
    assert not torch.equal(checks.positions, before)  # another seed, others
    assert int(checks.positions[:, 0].max()) < 120 and int(checks.positions[:, 1].max()) < 3


def test_an_output_written_after_its_call_shows_in_the_trace():
    """A call that hands back a buffer and writes it only at the next call: the trace right after it reads the
    buffer's old contents, while the buffer is right once the pass is over."""
    bank = _bank()
    checks = _checks(bank, link=None)
    pending: list = []

    def deferred(x, w, ids):
        for out, args in pending:  # the previous call's work, done now
            out.copy_(args[0] * args[1])
        pending.clear()
        out = torch.zeros_like(x)
        pending.append((out, (x, w)))
        return out

    outs = _pass(bank, checks, deferred)
    for out, args in pending:
        out.copy_(args[0] * args[1])
    assert all(torch.equal(outs[k], s["x"] * s["w"]) for k, s in enumerate(bank.slots))  # right at the end
    (trace,) = checks.traces()
    assert torch.count_nonzero(trace) == 0  # zeros when traced


def test_an_output_on_another_device_is_not_traced_and_does_not_stop_the_pass():
    """An entry that returns a tensor off the slots' device (a count on the host; here a meta tensor beside CPU
    slots) is an honest result: the checkpoint leaves it out rather than failing the oracle's window."""
    bank = _bank()
    checks = _checks(bank, link=None)
    both = lambda x, w, ids: (x * w, torch.empty(3, device="meta"))  # noqa: E731
    _pass(bank, checks, both)
    _filled(bank, checks, 4)
    outs = _pass(bank, checks, both)
    assert [row[1:] for row in checks.layout()[:2]] == [[0, 120], [1, 0]]
    (floats,) = checks.traces()
    assert torch.equal(floats[0], outs[checks.at[0]][0].reshape(-1)[checks.positions[0, 0]])


def test_a_link_rewrites_the_next_calls_input_with_values_of_that_input():
    bank = _bank()
    checks = _checks(bank)
    _pass(bank, checks)
    _filled(bank, checks, 7)
    fresh = [s["x"].clone() for s in bank.slots]
    _pass(bank, checks)
    for i, k in enumerate(checks.at):
        if k + 1 >= len(bank.slots):
            continue
        x, old = bank.slots[k + 1]["x"].reshape(-1), fresh[k + 1].reshape(-1)
        q = checks.links[0][1][i]
        assert len(set(q.tolist())) == len(q)  # distinct places: no two writes race on a device
        assert torch.equal(x[q], checks.links[0][2][i])
        assert all(bool((old == v).any()) for v in checks.links[0][2][i])  # values of that same input
        rest = torch.ones_like(old, dtype=torch.bool)
        rest[q] = False
        assert torch.equal(x[rest], old[rest]) and not torch.equal(x, old)
    untouched = [k for k in range(len(bank.slots)) if k - 1 not in checks.at]
    assert all(torch.equal(bank.slots[k]["x"], fresh[k]) for k in untouched)


def test_a_link_goes_into_a_strided_input_by_its_logical_positions():
    bank = SlotBank(ARGS, dataclasses.replace(CASE, strides={"x": [64, 1]}), "cpu", 6, per_slot_scales=False)
    bank.fill(1)
    assert not bank.slots[0]["x"].is_contiguous()
    checks = _checks(bank, at=(0, 2))
    _pass(bank, checks)
    _filled(bank, checks, 3)
    _pass(bank, checks)
    for i, k in enumerate(checks.at):
        assert torch.equal(bank.slots[k + 1]["x"].reshape(-1)[checks.links[0][1][i]], checks.links[0][2][i])


def test_a_link_into_an_input_smaller_than_its_values_writes_each_place_one_value():
    bank = SlotBank([ArgSpec("x", shape=["H"])], Case(symbols={"H": 3}, dtype="float32"), "cpu", 4,
                    per_slot_scales=False)
    bank.fill(1)
    checks = Checkpoints(bank.slots, [0, 1, 2], 8, "x")
    _pass(bank, checks, lambda x: x * 2)
    _filled(bank, checks, 2)
    for i in range(3):
        pairs = set(zip(checks.links[0][1][i].tolist(), checks.links[0][2][i].tolist()))
        assert len({q for q, _ in pairs}) == len(pairs) and {q for q, _ in pairs} <= {0, 1, 2}


def test_the_judge_draws_checkpoints_in_secret_and_links_a_float_input_the_entry_does_not_write():
    from runners.task import TaskSpec

    spec = TaskSpec.__new__(TaskSpec)
    spec.args, spec.written = ARGS, []
    p = Protocol()
    one = checkpoints.draw(spec, CASE, 100, p, seed=1)
    assert one["link"] == ["x", "w"] and len(one["at"]) == 13 and one["at"] == sorted(set(one["at"]))
    assert checkpoints.draw(spec, CASE, 100, p, seed=2)["at"] != one["at"]
    assert len(checkpoints.draw(spec, CASE, 3, p, seed=1)["at"]) == 3  # at least four, at most every call
    many = checkpoints.draw(spec, CASE, 8192, p, seed=1)["at"]  # at most checkpoint_most drawn, and every graph's edges
    edges = checkpoints.graph_edges(8192, GRAPH_SLOTS)
    assert len(edges) == 2 * (8192 // GRAPH_SLOTS - 1) and {GRAPH_SLOTS - 1, GRAPH_SLOTS, 8192 - GRAPH_SLOTS} <= edges
    assert edges <= set(many) and 256 <= len(many) <= 256 + len(edges) and many == sorted(set(many))
    assert checkpoints.graph_edges(GRAPH_SLOTS, GRAPH_SLOTS) == set()  # one graph: nothing besides the drawn
    spec.written = ["x"]
    assert checkpoints.draw(spec, CASE, 100, p, seed=1)["link"] == ["w"]
    spec.written = ["x", "w"]
    assert checkpoints.draw(spec, CASE, 100, p, seed=1)["link"] is None  # integers are never linked


def test_the_digest_binds_the_traces():
    hashes = torch.arange(4, dtype=torch.int64)
    traces = [torch.randn(3, 8), torch.arange(24).view(3, 8)]
    root = digest(hashes, 9, [], traces)
    assert root == digest(hashes, 9, [], [t.clone() for t in traces])
    changed = traces[0].clone()
    changed[2, 5] += 1e-6
    assert digest(hashes, 9, [], [changed, traces[1]]) != root
    assert digest(hashes, 9, [], [traces[0].half(), traces[1]]) != root
    assert digest(hashes, 9, []) != root


def _traces(bank_seed: int = 1, fn=_scale) -> tuple:
    bank = _bank(seed=bank_seed)
    checks = _checks(bank)
    _pass(bank, checks, fn)
    _filled(bank, checks, 11)
    _pass(bank, checks, fn)
    return {"at": checks.at}, ([t.clone() for t in checks.traces()], checks.layout())


def test_the_judge_refuses_traces_unlike_the_baselines_and_names_the_call():
    checks, ref = _traces()
    assert checkpoints.traces_wrong(checks, ref, ref, TOL) == ""
    (floats, ints), layout = ref
    stale = floats.clone()
    stale[1] = -stale[1]
    why = checkpoints.traces_wrong(checks, ([stale, ints], layout), ref, TOL)
    assert f"call {checks['at'][1]}" in why and "read right after that call" in why
    assert "another number" in checkpoints.traces_wrong(checks, ([floats], layout[::2]), ref, TOL)
    assert "wrong form" in checkpoints.traces_wrong(checks, ([floats.double(), ints], layout), ref, TOL)
    # within the tolerance: an honest rounding difference passes
    assert checkpoints.traces_wrong(checks, ([floats * (1 + 1e-7), ints], layout), ref, TOL) == ""


@pytest.mark.parametrize("bad", [{"checkpoints": {"kind": "tensor"}, "checkpoint_layout": "x"},
                                 {"checkpoints": None, "checkpoint_layout": [[1, 0, 3]]}])
def test_malformed_traces_are_a_wire_error_or_none(bad):
    from runners.wire import WireError

    if bad["checkpoints"] is None:
        assert checkpoints.read_traces(bad, lambda meta, most: meta) == ([], [[1, 0, 3]])
        return
    with pytest.raises(WireError):
        checkpoints.read_traces(bad, lambda meta, most: [torch.zeros(3)])


def test_the_checkpoints_time_is_taken_off_both_passes():
    """Both sides' passes carry the same checkpoints: without taking them off, a candidate twice as fast whose pass
    is half checkpoints would be seen at 1.5x."""
    passes_b, extra = [2000.0] * 3, 300.0
    walls_b = [p + extra for p in passes_b]
    walls_c = [1000.0 + 1000.0 + extra] * 3  # half the baseline's work, the same 1000 us of checkpoints
    passes_b = [p + 1000.0 for p in passes_b]
    walls_b = [w + 1000.0 for w in walls_b]
    seen = corroborate(walls_b, passes_b, walls_c, 2.0, 1.0, 0.05, 0.0, [0.0] * 3, 0, None, [1000.0] * 3)
    assert seen.judge_speedup == pytest.approx(2.0, rel=1e-6) and seen.ok
    blind = corroborate(walls_b, passes_b, walls_c, 2.0, 1.0, 0.05, 0.0, [0.0] * 3, 0, None)
    assert blind.judge_speedup == pytest.approx(1.5, rel=1e-6)
    # never more than half the oracle's pass, whatever the oracle reports
    capped = corroborate(walls_b, passes_b, walls_c, 2.0, 1.0, 0.05, 0.0, [0.0] * 3, 0, None, [1e9] * 3)
    assert capped.judge_speedup == pytest.approx((3000.0 - 1500.0) / (2000.0 - 1500.0), rel=1e-6)


# ---- on CUDA (the H200: bench/session13_h200.sh) ---------------------------------------------------------------------

_needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (see bench/gpu_checks.sh)")


@pytest.mark.gpu
@_needs_gpu
def test_gpu_checkpoints_are_captured_with_the_calls_and_the_fill_does_not_wait_for_the_device():
    """The window's graph keeps its capture with checkpoints in it (a fallback to events would change the clock for
    both sides), its traces and links are those of a direct pass, and the fill queues its copy without waiting for
    the device (inside the judge's clock, a wait would let the device reach the pass before the host queued it)."""
    from runners.timing import SlotTimer

    case = Case(symbols={"T": 4, "H": 4096}, dtype="float16")
    bank = SlotBank(ARGS, case, "cuda", 64, per_slot_scales=False)
    bank.fill(1)
    checks = Checkpoints(bank.slots, list(range(0, 64, 8)), 8, "x")
    timer = SlotTimer(_scale, bank.slots, checks)
    assert timer.prepare() == "cuda-graph" and checks.alone is not None
    torch.cuda._sleep(200_000_000)  # about 0.1 s of device work queued ahead
    bank.fill(9)
    checks.fill(9, bank.blocks, bank.numels)
    assert not torch.cuda.current_stream().query()  # the host went on while the device slept
    fresh = [s["x"].clone() for s in bank.slots]
    timer.run(1)
    torch.cuda.synchronize()
    floats, ints = checks.traces()
    for i, k in enumerate(checks.at):
        assert torch.equal(floats[i], timer.outputs[k][0].reshape(-1)[checks.positions[i, 0]])
        assert torch.equal(ints[i], timer.outputs[k][1].reshape(-1)[checks.positions[i, 1]])
        x = bank.slots[k + 1]["x"].reshape(-1)
        assert torch.equal(x[checks.links[0][1][i]], checks.links[0][2][i]) and not torch.equal(x, fresh[k + 1].reshape(-1))
        assert torch.equal(timer.outputs[k + 1][0], bank.slots[k + 1]["x"] * bank.slots[k + 1]["w"])
    assert 0.0 < checks.time_alone(timer.outputs) < 5000.0
