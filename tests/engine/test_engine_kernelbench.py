"""KernelBench-format tasks: the bundle built from a task file, and the paper's metrics."""
from engine_fixtures import ROOT

from evolver.edits import END, START, apply_rewrite
from evolver.kernelbench import ENTRY, build_bundle, load_task, module_source, summarize
from runners.policy import check_source
from runners.task import read_task

TASKS = ROOT / "examples" / "kernelbench"


def test_task_file_becomes_a_bundle_with_a_fixed_entry(tmp_path):
    task = load_task(TASKS / "level2" / "1_Linear_Scale_ReLU.py")
    assert task.level == "level2" and task.inputs == [{"shape": [8, 64], "dtype": "float32"}]
    spec = build_bundle(task, tmp_path)
    assert read_task(tmp_path).entry == ENTRY and spec.tolerance("float32").atol == 1e-2
    source = (tmp_path / "baseline" / spec.module).read_text()
    # the task's own torch Model is the reference (on a GPU, torch.compile's code for it seeds the rewrites)
    assert spec.reference == f"{spec.module}:{ENTRY}" and (tmp_path / "reference" / spec.module).read_text() == source
    assert source.index(START) < source.index("class Model") < source.index(END) < source.index(f"def {ENTRY}")
    assert check_source(source, source, ENTRY) == []
    namespace = {}
    exec(compile(source, "task", "exec"), namespace)  # noqa: S102 - our own bundle; the entry builds the model once
    import torch

    x = torch.randn(8, 64)
    first, again = namespace[ENTRY](x), namespace[ENTRY](x)
    torch.manual_seed(0)
    ref = namespace["Model"](64, 32, 0.5)(x)
    assert torch.equal(first, again) and torch.allclose(first, ref)


def test_a_rewrite_may_not_touch_the_entry():
    task = load_task(TASKS / "level1" / "1_ReLU.py")
    source = module_source(task)
    new_model = (ROOT / "tests/llm_server/recorded/kernelbench/relu_triton.py").read_text()
    child = apply_rewrite(source, f"```python\n{new_model}```")
    assert "_relu_kernel" in child and child.endswith(source[source.index(END):])


def test_metrics_per_level():
    rows = [{"level": "level1", "correct": True, "speedup": 2.0, "timed": True},
            {"level": "level1", "correct": True, "speedup": 0.5, "timed": True},
            {"level": "level1", "correct": False, "speedup": None, "timed": True},
            {"level": "level2", "correct": True, "speedup": None, "timed": False}]
    levels = summarize(rows)["levels"]
    assert levels["level1"]["correctness_rate"] == 2 / 3 and levels["level1"]["fast_1"] == 1 / 3
    assert abs(levels["level1"]["amsr"] - 2.0 / 3) < 1e-12  # below 1x counts as 0
    assert levels["level2"]["fast_1"] is None and levels["level2"]["correctness_rate"] == 1.0
