"""The recorded answers of the engine's H200 run (bench/engine_h200.sh, tests/llm_server/scripts/softmax_h200.json):
the rewrites recorded as faster are correct softmaxes, every answer of the first round gives the same module to a
rewrite and to a diff request, and the search with the script's options evaluates the faster rewrite, a broken one
and slower ones in its first four evaluations, whichever proposal's request reaches the server first."""
import importlib
import json
import shutil
import sys
import time

import pytest
import torch
from engine_fixtures import EXAMPLE, RECORDED, ROOT, SCRIPTS, RecordedLLM
from test_engine_archive import SOFTMAX, timed

from bot.config import load_config, task_spec
from evolver.candidate import Candidate
from evolver.edits import apply_diff, apply_rewrite
from evolver.engine import EngineOptions, new_archive, run_search

SCRIPT = SCRIPTS / "softmax_h200.json"
FIRST_ROUND = 4  # proposals in flight at once: the four of the first round race for the script's first answers
# What the H200 measured outside the judge (bench/softmax_variants_gpu.py): the geomean the fake device reports.
SPEEDS = {"split_few_rows": 1.08, "split_few_rows_1024": 1.07, "split_long_rows": 1.05, "split_rows": 0.93,
          "looped": 0.87, "rows_only": 0.87, "split_4096": 0.91}
BROKEN = {"wrong_axis", "forbidden_import"}


def _render():
    spec = importlib.util.spec_from_file_location("ks_llm_server_render", ROOT / "tests/llm_server/server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render


render = _render()
script = json.loads(SCRIPT.read_text())


def test_the_first_round_answers_give_the_same_module_to_a_rewrite_and_to_a_diff():
    usable = script[:FIRST_ROUND]
    assert all("file" in e for e in usable), "a 429/500 or a one-kind answer in the first round reorders the run"
    for entry in usable:
        text = render(entry)
        module = (RECORDED / entry["file"]).read_text()
        assert apply_rewrite(SOFTMAX, text) == module
        assert apply_diff(SOFTMAX, text) == module, entry["file"]


def test_every_recorded_answer_file_exists_and_the_faster_one_comes_first():
    for entry in script:
        if "file" in entry:
            assert (RECORDED / entry["file"]).is_file(), entry["file"]
    assert script[0]["file"] == "softmax/split_few_rows.py"


@pytest.fixture(scope="module")
def recorded_modules(tmp_path_factory):
    """The recorded softmax rewrites as modules of a package beside the example's utils.py (their relative import)."""
    root = tmp_path_factory.mktemp("recorded")
    pkg = root / "h200rec"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(EXAMPLE / "tinyserve/kernels/utils.py", pkg / "utils.py")
    for name in ("split_few_rows", "split_few_rows_1024", "split_long_rows"):
        shutil.copy(RECORDED / "softmax" / f"{name}.py", pkg / f"{name}.py")
    sys.path.insert(0, str(root))
    try:
        yield lambda name: importlib.import_module(f"h200rec.{name}")
    finally:
        sys.path.remove(str(root))


TOLS = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float16: dict(atol=1e-3, rtol=4e-3)}


@pytest.mark.parametrize("name", ["split_few_rows", "split_few_rows_1024", "split_long_rows"])
def test_the_faster_rewrites_are_softmaxes(recorded_modules, name):
    softmax = recorded_modules(name).softmax
    gen = torch.Generator().manual_seed(0)
    # the split path (N > 8192, few rows), the one-program-per-row path either side of the row limit, short rows
    for shape in [(1, 9000), (3, 8300), (33, 8200), (6, 200), (1, 1)]:
        for dtype in (torch.float32, torch.float16):
            x = (torch.randn(shape, generator=gen) * 4).to(dtype)
            out = softmax(x)
            assert out.dtype == dtype and out.shape == x.shape
            torch.testing.assert_close(out.float(), torch.softmax(x.float(), -1), **TOLS[dtype])
    buf = torch.randn(2, 12000, generator=gen)
    x = buf[:, :9500]  # strided rows
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1), **TOLS[torch.float32])
    x = torch.randn(9000, 2, generator=gen).t()  # a last dim that is not contiguous
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1), **TOLS[torch.float32])
    x = torch.randn(2, 9000, generator=gen)
    x[0, :4000] = -float("inf")  # whole chunks of masked logits: no NaN from their partials
    x[1, 2000:] = -float("inf")
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1), **TOLS[torch.float32])


class _Evaluator:
    """What run_search reads of an evaluator; the fake device below does the evaluating."""

    def __init__(self):
        self.spec = task_spec("softmax", load_config(EXAMPLE).kernels["softmax"], "triton")
        self.baseline = SOFTMAX
        self.backend = "triton"


def _names() -> dict[str, str]:
    return {p.read_text(): p.stem for p in (RECORDED / "softmax").glob("*.py")}


def _run(tmp_path, budget: int):
    """The search as `kernelsmith optimize --models M --operators rewrite,diff --preset kernel-smith --seed 1` runs
    it in bench/engine_h200.sh, with a device that reports the H200's speeds after a short wait."""
    names, evaluated = _names(), []

    def device(cand: Candidate):
        time.sleep(0.2)
        name = names.get(cand.source, "other")
        evaluated.append(name)
        return timed(None, ok=False) if name in BROKEN else timed(SPEEDS.get(name, 1.0))

    with RecordedLLM(SCRIPT) as server:
        models = tmp_path / "models.yaml"
        models.write_text(json.dumps({"models": [{"name": "recorded-local", "provider": "openai",
                                                  "model": "recorded", "base_url": server.url + "/v1",
                                                  "timeout_s": 30, "backoff_s": 0.05}]}))
        opts = EngineOptions(budget=budget, models=models, operators=["rewrite", "diff"], preset="kernel-smith")
        evaluator = _Evaluator()
        baseline = Candidate(0, SOFTMAX, "baseline")
        baseline.evaluation = timed(1.0)
        engine = run_search(evaluator, baseline, opts, tmp_path, 1, archive=new_archive(opts), evaluate=device)
        engine.store.close()
    return engine, evaluated


@pytest.mark.parametrize("attempt", range(3))  # the first round's four requests race to the server
def test_the_first_four_evaluations_hold_the_faster_rewrite_a_broken_and_a_slower_one(tmp_path, attempt):
    engine, evaluated = _run(tmp_path, 4)
    assert sorted(evaluated) == sorted(["split_few_rows", "wrong_axis", "split_rows", "split_long_rows"])
    assert engine.summary.rejected_proposals == 0 and engine.summary.stop == "evaluations"
    best = engine.archive.best()
    assert _names()[best.source] == "split_few_rows"
    assert {c.operator for c in engine.archive.candidates if c.id} == {"rewrite", "diff"}  # seed 1: both kinds


def test_six_evaluations_add_a_near_variant_and_a_diff_on_a_parent(tmp_path):
    engine, evaluated = _run(tmp_path, 6)
    assert len(evaluated) == 6 and "split_few_rows_1024" in evaluated
    assert _names()[engine.archive.best().source] == "split_few_rows"
