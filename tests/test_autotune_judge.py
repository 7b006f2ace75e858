"""Autotuned kernels: both sides run the oracle's configs unless the candidate changes the config list."""
import pytest

from conftest import EXAMPLE


@pytest.fixture(scope="module")
def layer_norm_evaluator(tmp_path_factory):
    from bot.config import load_config, task_spec
    from runners.extract import build_bundle
    from runners.extract import copy_reference
    from runners.sandbox import Evaluator

    spec = task_spec("layer_norm", load_config(EXAMPLE).kernels["layer_norm"], "interpret")
    bundle = tmp_path_factory.mktemp("layer-norm")
    build_bundle(EXAMPLE, spec, bundle)
    copy_reference(EXAMPLE, bundle, spec.reference)
    with Evaluator(bundle, "interpret", timeout=120, trials=1) as evaluator:
        yield evaluator


def test_a_copy_of_an_autotuned_kernel_runs_the_oracles_configs(layer_norm_evaluator):
    ev = layer_norm_evaluator.evaluate(layer_norm_evaluator.baseline + "\n# a copy\n", seed=1)
    assert ev.ok, ev.error
    assert all(c.autotune == {"_layer_norm_kernel": "pinned"} for c in ev.cases)


def test_a_changed_config_list_autotunes_its_own(layer_norm_evaluator):
    source = layer_norm_evaluator.baseline.replace("for rows in (1, 4, 16)", "for rows in (2, 4, 16)")
    assert source != layer_norm_evaluator.baseline
    ev = layer_norm_evaluator.evaluate(source, seed=2)
    assert ev.ok, ev.error
    assert all(c.autotune == {"_layer_norm_kernel": "own configs"} for c in ev.cases)


def test_a_re_keyed_kernel_is_not_reported_as_pinned(layer_norm_evaluator):
    """Its config list is the oracle's, but its key is not: it autotunes at keys the oracle never saw."""
    source = layer_norm_evaluator.baseline.replace('key=["N"]', 'key=["N", "M"]')
    assert source != layer_norm_evaluator.baseline
    ev = layer_norm_evaluator.evaluate(source, seed=3)
    assert ev.ok, ev.error
    assert all(c.autotune == {"_layer_norm_kernel": "own key"} for c in ev.cases)


def test_the_same_configs_in_another_order_are_pinned():
    """Round 8's review: a copy whose config list is only reordered got "own configs" and autotuned on its own, so a
    search could pick whichever copy's own pick beat the oracle's noisy one. Pinning compares the lists as sets and
    gives the oracle's choice by name (``runners/launches.py pin``; on a GPU, where the lists are not cut to their
    first config)."""
    import types

    import triton
    import triton.language as tl

    from runners import launches

    def module(order):
        configs = [triton.Config({"ROWS": r}, num_warps=w) for r, w in order]

        @triton.autotune(configs=configs, key=["n"])
        @triton.jit
        def _k(x_ptr, n, ROWS: tl.constexpr):
            pass

        return types.SimpleNamespace(_k=_k)

    oracle = module([(1, 1), (4, 4), (16, 8)])
    state = launches.autotune_state(oracle)
    state["_k"]["chosen"] = [[[128], str(oracle._k.configs[1])]]  # the oracle's pick at n=128: ROWS=4, 4 warps
    reordered = module([(16, 8), (4, 4), (1, 1)])
    assert launches.pin(reordered, state) == {"_k": "pinned"}
    assert reordered._k.cache[(128,)].kwargs == {"ROWS": 4} and reordered._k.cache[(128,)].num_warps == 4
    changed = module([(16, 8), (4, 4), (2, 1)])
    assert launches.pin(changed, state) == {"_k": "own configs"} and not changed._k.cache


# ---- the baseline's picks, once per bundle (runners/autotune_pins.py) --------------------------------------------
_STATE = {"_k": {"configs": ["A", "B", "C"], "key": ["N"], "chosen": [[[4096, "torch.bfloat16"], "C"]]}}


def test_the_first_oracles_picks_are_kept_for_the_bundle_and_merged(tmp_path):
    """On the H200 each fresh oracle of the example's LayerNorm drew its own pick (key N only, the first call's rows
    decide): the baseline's bfloat16 medians moved 1.6-3.6x between evaluators. The first picks stay in the bundle."""
    from runners.autotune_pins import FILE, BaselinePins

    first = BaselinePins(tmp_path)
    assert first.state == {} and not first.loaded
    assert first.after(_STATE, None) == []  # the first oracle drew them: nothing to say
    assert (tmp_path / FILE).is_file()
    later = BaselinePins(tmp_path)
    assert later.loaded and later.state == _STATE
    assert later.merge(_STATE) is False  # nothing new: not rewritten
    grown = {"_k": {**_STATE["_k"], "chosen": [[[4096, "torch.bfloat16"], "A"], [[4096, "torch.float16"], "B"]]}}
    assert later.merge(grown) is True
    # a key already kept keeps its first pick; a new key is added
    assert BaselinePins(tmp_path).state["_k"]["chosen"] == [[[4096, "torch.bfloat16"], "C"],
                                                            [[4096, "torch.float16"], "B"]]
    note = later.after(_STATE, {"_k": "pinned"})
    assert len(note) == 1 and "(4096, 'torch.bfloat16') -> C" in note[0] and FILE in note[0]
    assert later.after(_STATE, {"_k": "own configs"}) == []  # the oracle did not take them: not said
    # the baseline's configs changed (another bundle version): its picks start over
    changed = {"_k": {"configs": ["A", "B"], "key": ["N"], "chosen": [[[4096, "torch.bfloat16"], "B"]]}}
    assert later.merge(changed) is True and BaselinePins(tmp_path).state == changed


def test_a_damaged_pins_file_is_read_as_no_picks(tmp_path):
    from runners.autotune_pins import FILE, BaselinePins

    (tmp_path / FILE).write_text("{not json")
    assert BaselinePins(tmp_path).state == {}
    bad = {"_k": {"configs": ["A"], "key": ["N"], "chosen": [[[1], "Z"], "junk", [[2], "A"]]}, "x": [1], "y": {}}
    (tmp_path / FILE).write_text(__import__("json").dumps(bad))
    assert BaselinePins(tmp_path).state == {"_k": {"configs": ["A"], "key": ["N"], "chosen": [[[2], "A"]]}}


def test_the_oracle_takes_the_pins_at_load(tmp_path):
    """runners/worker.py load: the picks sent with the oracle's load request go into its autotuners before any call
    (in a process of its own: load installs the worker's launch hooks)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "pinmod.py").write_text(
        "import triton\nimport triton.language as tl\n"
        "CONFIGS = [triton.Config({'ROWS': r}, num_warps=w) for r, w in ((1, 1), (4, 4), (16, 8))]\n"
        "@triton.autotune(configs=CONFIGS, key=['N'])\n@triton.jit\n"
        "def _k(x_ptr, N, ROWS: tl.constexpr):\n    pass\n"
        "def entry(x):\n    return x\n")
    script = f"""
import json, sys
sys.path.insert(0, {str(root)!r})
from runners import launches
from runners.worker import Server
s = Server(None)
load = dict(device="cpu", exchange={str(tmp_path)!r}, outbox={str(tmp_path)!r}, workdir={str(tmp_path)!r},
            import_paths=[], module_name="pinmod", entry="entry", interpret=False)
sys.path.insert(0, {str(tmp_path)!r})
import pinmod
state = launches.autotune_state(pinmod)
state["_k"]["chosen"] = [[[4096, "torch.bfloat16"], str(pinmod._k.configs[2])]]
info = s.load(dict(load, pin=state))
print(json.dumps({{"pinned": info.get("pinned"), "cache": {{str(k): v.kwargs for k, v in s.module._k.cache.items()}}}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "TRITON_INTERPRET": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"pinned": {"_k": "pinned"}, "cache": {"(4096, 'torch.bfloat16')": {"ROWS": 16}}}


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
def test_gpu_a_later_evaluator_of_the_bundle_pins_the_first_oracles_picks(tmp_path):
    """Prediction (not yet run on the H200): the second evaluator's oracle takes the first one's LayerNorm picks at
    load, says so in the evaluation's notes, and ends with the same autotune state."""
    from bot.config import load_config, task_spec
    from runners.autotune_pins import FILE, BaselinePins
    from runners.extract import build_bundle
    from runners.sandbox import Evaluator

    spec = task_spec("layer_norm", load_config(EXAMPLE).kernels["layer_norm"], "triton")
    build_bundle(EXAMPLE, spec, tmp_path)
    with Evaluator(tmp_path, "triton", timeout=300, trials=1) as ev:
        first = ev.evaluate(ev.baseline, seed=1, time_it=False)
    assert first.ok, first.error
    kept = BaselinePins(tmp_path).state
    assert kept["_layer_norm_kernel"]["chosen"], kept
    with Evaluator(tmp_path, "triton", timeout=300, trials=1) as ev:
        second = ev.evaluate(ev.baseline, seed=2, time_it=False)
    assert second.ok, second.error
    assert any(FILE in n for n in second.notes), second.notes
    assert BaselinePins(tmp_path).state == kept
