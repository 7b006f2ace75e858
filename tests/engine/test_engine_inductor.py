"""torch.compile's Triton code for the config's reference: read from inductor's output, offered in the prompt as
an inspiration and as a seed (the first rewrite on an island ports it), said honestly to be absent on the CPU,
and never able to stop a run."""
import json
import secrets
from pathlib import Path

import pytest
from engine_fixtures import EXAMPLE, RecordedLLM, models_file

from bot.config import load_config, task_spec
from evolver.candidate import Candidate
from evolver.engine import EngineOptions, run_search
from evolver.inductor_seed import SEED, InductorCode, capture, from_capture, reference_source
from evolver.prompts import PromptBuilder
from evolver.store import RunStore
from runners.extract import build_bundle
from runners.extract import copy_reference
from runners.sandbox import Evaluator
from runners.task import read_task

RECORDED = Path(__file__).resolve().parent / "recorded" / "inductor_rms_norm_cpu.json"
REFERENCE = "tinyserve/reference.py:rms_norm"
KERNEL = "triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0"


@pytest.fixture(scope="module")
def rms_bundle(tmp_path_factory) -> Path:
    spec = task_spec("rms_norm", load_config(EXAMPLE).kernels["rms_norm"], "interpret")
    bundle = tmp_path_factory.mktemp("rms-bundle")
    build_bundle(EXAMPLE, spec, bundle)
    copy_reference(EXAMPLE, bundle, spec.reference)
    return bundle


@pytest.fixture(scope="module")
def rms_evaluator(rms_bundle):
    with Evaluator(rms_bundle, "interpret", timeout=120, trials=1) as evaluator:
        baseline = Candidate(0, evaluator.baseline, "baseline")
        baseline.evaluation = evaluator.evaluate(baseline.source, secrets.randbits(62))
        yield evaluator, baseline


def recorded() -> InductorCode:
    return from_capture(json.loads(RECORDED.read_text()), REFERENCE)


def test_inductor_output_becomes_plain_kernels_and_a_launch():
    code = recorded()
    assert code.available and code.case == "T=5,H=96,residual/float16" and [k.name for k in code.kernels] == [KERNEL]
    source = code.kernels[0].source
    assert source.startswith("@triton.jit\ndef " + KERNEL) and "triton_heuristics" not in source
    assert "tl.sum(" in source and code.kernels[0].helpers == ["libdevice."]
    assert ".run(" in code.launcher and "assert_size_stride" not in code.launcher
    assert code.launcher.startswith("def call(") and "\n    buf1 = " in code.launcher  # dedented
    short = code.prompt_text(limit=200)  # a kernel is kept whole; the launch goes when over the limit
    assert KERNEL in short and "inductor's launch" not in short
    assert InductorCode.from_dict(json.loads(json.dumps(code.to_dict()))) == code


def test_bad_output_and_failed_captures_are_reasons_not_crashes():
    assert not from_capture({"ok": False, "error": "RuntimeError: boom"}, REFERENCE).available
    assert "boom" in from_capture({"ok": False, "error": "RuntimeError: boom"}, REFERENCE).reason
    assert "no Triton kernel" in from_capture({"ok": True, "codes": ["x = 1\n"]}, REFERENCE).reason
    assert "could not be read" in from_capture({"ok": True, "codes": ["def (:"]}, REFERENCE).reason


def test_on_the_cpu_none_is_offered_and_the_prompt_says_why(rms_bundle):
    spec = read_task(rms_bundle)
    code = capture(rms_bundle, spec, "interpret")
    assert not code.available and "CUDA" in code.reason and "interpret" in code.reason
    baseline = (rms_bundle / "baseline" / spec.module).read_text()
    b = PromptBuilder(spec, baseline, "interpret", reference_source=reference_source(rms_bundle, spec.reference),
                      inductor=code)
    assert "not offered in this run" in b.static and "CUDA" in b.static and b.inductor is None
    assert "def rms_norm(hidden_states, weight" in b.static and "torch.rsqrt" in b.static  # the torch op itself


def test_the_prompt_offers_the_code_as_inspiration_and_asks_for_a_port(rms_bundle):
    spec = read_task(rms_bundle)
    baseline = (rms_bundle / "baseline" / spec.module).read_text()
    b = PromptBuilder(spec, baseline, "triton", "NVIDIA H200", inductor=recorded())
    assert KERNEL in b.static and "hard-codes that case's sizes" in b.static and "`libdevice`" in b.static
    seed = b.build(Candidate(0, baseline, "baseline"), [], [], kind="seed")
    assert "Port the kernel that torch.compile generated" in seed.dynamic and "`rms_norm`" in seed.dynamic
    assert "Port the kernel" not in b.build(Candidate(0, baseline, "baseline"), [], [], kind="rewrite").dynamic


def test_capture_subprocess_failures_and_deadline_are_reasons(rms_bundle, tmp_path, monkeypatch):
    """The reference runs in a subprocess without the API keys; its failure and a deadline are reasons."""
    monkeypatch.setenv("KS_TEST_LLM_KEY", "sk-never-in-the-capture")
    broken = tmp_path / "broken"
    build_bundle(EXAMPLE, read_task(rms_bundle), broken)
    (broken / "reference" / "tinyserve").mkdir(parents=True)
    (broken / "reference" / "tinyserve" / "reference.py").write_text(
        "import os\n\ndef rms_norm(*a, **k):\n    raise ValueError(f'reference broke {[k for k in os.environ "
        "if \"KEY\" in k]}')\n")
    code = capture(broken, read_task(rms_bundle), "interpret", out=tmp_path / "out", cpu_triton=True, timeout=240)
    assert not code.available and "reference broke []" in code.reason
    assert json.loads((tmp_path / "out" / "inductor.json").read_text())["ok"] is False
    late = capture(rms_bundle, read_task(rms_bundle), "interpret", cpu_triton=True, timeout=0.5)
    assert not late.available and "longer than" in late.reason


@pytest.mark.slow
def test_capture_runs_torch_compile_in_a_subprocess(rms_bundle, tmp_path):
    """The real path on a machine without a GPU: inductor's Triton backend for the CPU writes the code."""
    code = capture(rms_bundle, read_task(rms_bundle), "interpret", out=tmp_path, cpu_triton=True, timeout=400)
    assert code.available, code.reason
    assert any("rsqrt" in k.source and "@triton.jit" in k.source for k in code.kernels)
    assert code.case == "T=5,H=96,residual/float16" and (tmp_path / "inductor.json").is_file()


def test_a_run_seeds_from_the_recording_and_evaluates_the_port(rms_evaluator, tmp_path):
    """The first rewrite ports torch.compile's kernel (parent: the baseline); the port is evaluated correct."""
    script = [{"file": "rms_norm/inductor_port.py", "preface": "Inductor keeps the row in registers."}]
    evaluator, baseline = rms_evaluator
    with RecordedLLM(script) as server:
        opts = EngineOptions(budget=1, models=models_file(tmp_path, server.url), operators=["rewrite"], islands=1,
                             in_flight=1, inductor_code=RECORDED)
        engine = run_search(evaluator, baseline, opts, tmp_path, seed=3)
    port = engine.archive.candidates[1]
    assert port.genome["seed"] == SEED and port.parent_id == 0 and port.correct, port.evaluation
    store = RunStore(tmp_path / "run.sqlite")
    call = store.call_rows()[0]
    assert call["kind"] == "seed" and KERNEL in call["static"] and "Port the kernel" in call["dynamic"]
    assert store.get("inductor")["available"] and store.get("inductor")["case"]
    store.close()
    search = json.loads((tmp_path / "search.json").read_text())
    assert search["torch_compile"]["offered"] and search["torch_compile"]["seeds"] == 1
    assert search["torch_compile"]["seeds_correct"] == 1


def test_without_a_recording_on_the_cpu_the_run_goes_on(rms_evaluator, tmp_path):
    script = [{"file": "rms_norm/inductor_port.py"}]
    evaluator, baseline = rms_evaluator
    with RecordedLLM(script) as server:
        opts = EngineOptions(budget=1, models=models_file(tmp_path, server.url), operators=["rewrite"], islands=1,
                             in_flight=1)
        engine = run_search(evaluator, baseline, opts, tmp_path, seed=3)
        static = server.requests[0]["body"]["messages"][1]["content"]
    assert engine.summary.evaluated == 1 and "seed" not in engine.archive.candidates[1].genome
    assert "not offered in this run" in static
    search = json.loads((tmp_path / "search.json").read_text())
    assert not search["torch_compile"]["offered"] and "CUDA" in search["torch_compile"]["reason"]



def test_a_resumed_run_offers_the_code_it_saved(tmp_path):
    """The store keeps the code, so a resumed run's prompts are the same and nothing is generated again."""
    from types import SimpleNamespace

    from evolver.engine import _inductor_code

    store = RunStore(tmp_path / "run.sqlite")
    evaluator = SimpleNamespace(spec=SimpleNamespace(reference=REFERENCE), backend="triton", bundle=tmp_path)
    first = _inductor_code(evaluator, EngineOptions(inductor_code=RECORDED), store, tmp_path)
    again = _inductor_code(evaluator, EngineOptions(inductor_code=tmp_path / "gone.json"), store, tmp_path)
    assert first.available and again == first
    unread = _inductor_code(evaluator, EngineOptions(inductor_code=tmp_path / "gone.json"),
                            RunStore(tmp_path / "other.sqlite"), tmp_path)
    assert not unread.available and "could not be read" in unread.reason
    store.close()
