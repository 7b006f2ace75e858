"""GPU behaviour of the evaluator (timing, poisoning, timed-output checks). Runs only where CUDA is present:
on the H200 through bench/gpu_checks.sh, whose output is committed under bench/results/."""
import pytest
import torch
from conftest import CHEATS, EXAMPLE, run_past_the_policy

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (see bench/gpu_checks.sh)")]


@pytest.fixture(scope="module")
def gpu_evaluator(tmp_path_factory):
    from bot.config import load_config, task_spec
    from runners.extract import build_bundle
    from runners.extract import copy_reference
    from runners.sandbox import Evaluator

    spec = task_spec("rms_norm", load_config(EXAMPLE).kernels["rms_norm"], "triton")
    bundle = tmp_path_factory.mktemp("gpu-bundle")
    build_bundle(EXAMPLE, spec, bundle)
    copy_reference(EXAMPLE, bundle, spec.reference)
    with Evaluator(bundle, "triton", timeout=300, trials=2) as evaluator:
        yield evaluator


def test_baseline_against_itself_times_near_one(gpu_evaluator):
    ev = gpu_evaluator.evaluate(gpu_evaluator.baseline, seed=1, reference=True)
    assert ev.ok and ev.timed, ev.error
    print("self:", [(c.case, round(c.speedup, 4), c.judge_ratio and round(c.judge_ratio, 3),
                     round(c.baseline_spread, 4), round(c.candidate_spread, 4), c.samples) for c in ev.cases])
    for case in ev.cases:
        assert case.timing_method == "cuda-graph" and case.slots >= 2
        assert 0.98 < case.speedup < 1.02, case  # 0.994-1.006 in 4 fresh evaluators (H200, session 11)
        assert len(case.window_ms) == 2 * gpu_evaluator.protocol.window_rounds, case  # the judge's clock ran
        # it has a time wherever it resolves the size, and says where it does not (credited 1.0x): at T=512 (about
        # 750 slots of 8 MB) the oracle's extra (fill and commitments, 9-10 ms) moved by 1 ms against a 3 ms pass, and
        # at T=1 (1.4 us a call) the H200 left bfloat16 unresolved (session 21)
        assert case.judge_us or "unresolved" in case.message, case
        assert case.baseline_host_us > 0 and case.candidate_host_us > 0
        assert case.reference_us and case.reference_us > 0  # torch.compile of the reference, timed
        assert any(k.endswith(":_rms_norm_kernel") for k in case.launched)
    assert ev.env.peak_bandwidth_gbs > 1000 and "H" in ev.env.device


@pytest.mark.parametrize("cheat, stage", [
    ("wrong_result.py", "correctness"),
    ("uninitialised_output.py", "correctness"),
    ("memoized_output.py", "correctness"),
    ("modifies_input.py", "correctness"),
    ("nan_output.py", "correctness"),
    ("torch_only.py", "kernel"),
    ("lazy_after_warmup.py", "kernel"),
])
def test_cheats_are_caught_on_the_gpu(gpu_evaluator, cheat, stage):
    ev = gpu_evaluator.evaluate((CHEATS / cheat).read_text(), seed=2)
    assert not ev.ok and ev.stage == stage, (ev.stage, ev.error)


def test_honest_rewrite_is_timed(gpu_evaluator):
    ev = gpu_evaluator.evaluate((CHEATS / "honest_rewrite.py").read_text(), seed=3)
    assert ev.ok and ev.timed and ev.fitness > 0, ev.error
    # a judge's time wherever the clock resolves the size; where it does not, no credit beyond parity (on the H200
    # the clock left T=1 float16 and T=512 unresolved for this rewrite, twentieth session)
    assert all(c.judge_us or ("unresolved" in c.message and c.speedup <= 1.0) for c in ev.cases), \
        [(c.case, c.speedup, c.judge_ratio, c.message) for c in ev.cases]


@pytest.mark.parametrize("cheat", ["remembers_inputs.py", "slowed_oracle.py", "patches_timer.py",
                                   "detects_capture.py", "side_stream.py"])
def test_cheats_past_the_policy_get_no_speedup_on_the_gpu(gpu_evaluator, cheat):
    ev = run_past_the_policy(gpu_evaluator, (CHEATS / cheat).read_text(), time_it=True)
    assert not ev.ok, (ev.stage, [(c.case, c.speedup, c.judge_ratio) for c in ev.cases])


def test_a_prefetched_candidate_arrives_compiled_and_is_judged_the_same(gpu_evaluator):
    """The search's pipeline on the GPU: the next candidate is loaded into the warm spare while another is judged,
    and its kernels compiled at the cases' shapes with nothing launched (runners/warm.py); its evaluation then
    starts compiled, with the same verdict as without."""
    import threading

    honest = (CHEATS / "honest_rewrite.py").read_text()
    judged = []
    t = threading.Thread(target=lambda: judged.append(gpu_evaluator.evaluate(gpu_evaluator.baseline + "\n# judged\n",
                                                                              seed=5, protocol="search")))
    t.start()
    assert gpu_evaluator.prefetch(honest)
    t.join()
    assert judged[0].ok, judged[0].error
    ev = gpu_evaluator.evaluate(honest, seed=6, protocol="search")
    assert ev.ok and ev.timed, ev.error
    assert ev.phases.get("prefetch.warm", 0) > 0 and "load" not in ev.phases, ev.phases
    assert not [n for n in ev.notes if n.startswith("prefetch")], ev.notes  # every case compiled without an error
    print("prefetched:", {k: round(v, 3) for k, v in ev.phases.items()})


_SAME_NAMED = """
import triton
import triton.language as tl


@triton.jit
def _fwd_kernel(x, n, REPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    for _ in range(REPS):
        v = v * 1.0001 + 0.5
    tl.store(x + offs, v, mask=offs < n)


def run(x, reps):
    _fwd_kernel[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), REPS=reps, BLOCK=1024)
"""


def test_the_profile_matches_same_named_kernels_to_their_launches(tmp_path):
    """Two packages' kernels named alike (``_fwd_kernel``): the profile's sums by name cannot tell them apart, its
    device events in order can (runners/kernel_share.py ``attributed_us``): the candidate's long kernel is credited
    its own time, not the library's short one's."""
    import importlib.util

    from runners import launches
    from runners.kernel_share import attributed_us
    from runners.timing import device_kernels

    launches.install()
    mods = []
    for name in ("cand_attn", "otherlib_ops"):
        (tmp_path / f"{name}.py").write_text(_SAME_NAMED)
        spec = importlib.util.spec_from_file_location(name, tmp_path / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods.append(mod)
    x = torch.randn(1 << 22, device="cuda")
    recorder = launches.Recorder()
    # 4096 dependent steps an element against one: the first kernel compute-bound (about 0.2 ms on the H200), the
    # second a copy (about 10 us at 16 MB; with 64 steps the two were 10.8 and 6.7 us)
    sums, sequence = device_kernels(lambda: (mods[0].run(x, 4096), mods[1].run(x, 1)), around=recorder)
    launched = [f"{m}:{k}" for m, k in recorder.launched]
    assert launched == ["cand_attn:_fwd_kernel", "otherlib_ops:_fwd_kernel"], launched
    named = [(n, us) for n, us, link in sequence or [] if n.startswith("_fwd_kernel") and link > 0]
    assert len(named) == 2 and named[0][1] > 2 * named[1][1], sequence
    total = sum(us for n, us in sums if n.startswith("_fwd_kernel"))
    assert attributed_us(sequence, launched, launched[:1]) == named[0][1]
    assert named[0][1] > 0.6 * total, (sums, sequence)


def test_no_timed_graph_is_the_process_first(tmp_path):
    """The first CUDA graph a process makes replayed RMSNorm's T=1 calls 12 % faster on the H200 until the process
    made a second one (session 22: 1.44 against 1.62 us, for the process's life): a worker that timed its first graph
    beat its twin. A worker retires one graph before each timed capture (runners/timing.py retire_first_graph), so
    a timer's samples read the same before and after another graph is made. bench/placement_gpu.py, HOLD=2: a fresh
    process, one bank sampled, a tiny unrelated graph captured, the same bank sampled again."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "between.json"
    subprocess.run([sys.executable, str(root / "bench" / "placement_gpu.py"), str(out)], cwd=root, check=True,
                   timeout=240, env={**os.environ, "HOLD": "2", "EVENT": "graph",
                                     "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])})
    got = json.loads(out.read_text())
    for after in got["after_us"]:
        assert abs(after / got["before_us"] - 1) < 0.03, got


def test_a_pass_is_captured_as_runs_of_graphs_that_replay_every_call(tmp_path):
    """A timed pass is captured as graphs of ``GRAPH_SLOTS`` calls each (a graph's launch is host work before the
    device starts on it: one graph of 8192 calls hid 3-6 ms of the host inside the pass, session 24). Every slot is
    still called once a pass, in order, on its own values, with the checkpoints after the calls drawn, and what the
    window commits to is the pass's outputs."""
    from runners.timing import GRAPH_SLOTS, SlotTimer

    count = 2 * GRAPH_SLOTS + 7
    slots = [{"x": torch.randn(64, device="cuda")} for _ in range(count)]
    calls = []

    def fn(x):
        calls.append(1)
        return x * 2 + 1

    timer = SlotTimer(fn, slots)
    assert timer.prepare() == "cuda-graph"
    assert len(timer.graphs) == 3 and timer.graph is timer.graphs[0]
    captured = len(calls)
    for k in range(count):  # new values in place, then one pass over the graphs
        slots[k]["x"].copy_(torch.full((64,), float(k), device="cuda"))
    pass_us, root, parts = timer.window(lead_cycles=1000, key=7)
    assert len(calls) == captured  # replayed, not called again
    assert pass_us > 0 and type(root) is int and parts["replay_us"] > 0
    for k in (0, GRAPH_SLOTS - 1, GRAPH_SLOTS, count - 1):
        assert torch.equal(timer.outputs[k], torch.full((64,), 2.0 * k + 1, device="cuda")), k
    assert timer.commit(7) == root  # the outputs committed to are the pass's
