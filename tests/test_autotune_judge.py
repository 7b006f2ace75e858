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
