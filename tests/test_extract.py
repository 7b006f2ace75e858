import pytest

from runners.extract import (
    ExtractionError,
    build_bundle,
    entry_signature,
    local_imports,
)
from runners.task import Case, TaskSpec, read_task


def _write(root, files):
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_follows_relative_imports_transitively(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "import heavy_engine\n",
        "pkg/kernels/k.py": "from .utils import helper\nfrom . import tiles\nimport torch\n",
        "pkg/kernels/utils.py": "from ..common import shared\n",
        "pkg/kernels/tiles.py": "",
        "pkg/common.py": "",
    })
    assert sorted(local_imports(tmp_path, "pkg/kernels/k.py")) == [
        "pkg/common.py", "pkg/kernels/k.py", "pkg/kernels/tiles.py", "pkg/kernels/utils.py"]


def test_missing_helper_is_named(tmp_path):
    _write(tmp_path, {"pkg/k.py": "x = 1\nfrom .gone import helper\n"})
    with pytest.raises(ExtractionError, match=r"pkg/k.py line 2.*from \.gone"):
        local_imports(tmp_path, "pkg/k.py")


def test_unparsable_module_is_named(tmp_path):
    _write(tmp_path, {"k.py": "def f(:\n"})
    with pytest.raises(ExtractionError, match="does not parse"):
        local_imports(tmp_path, "k.py")


def test_bundle_is_written_and_read_back(tmp_path):
    _write(tmp_path / "repo", {"pkg/k.py": "from .u import f\n", "pkg/u.py": "def f(): pass\n",
                               "pkg/__init__.py": "raise ImportError('never copied')\n"})
    spec = TaskSpec(kernel="k", module="pkg/k.py", entry="f", args=[], cases=[Case({"N": 4}, "float16")])
    build_bundle(tmp_path / "repo", spec, tmp_path / "bundle")
    assert sorted(p.name for p in (tmp_path / "bundle/baseline/pkg").iterdir()) == ["k.py", "u.py"]
    back = read_task(tmp_path / "bundle")
    assert back.files == ["pkg/k.py", "pkg/u.py"] and back.cases[0].id == "N=4/float16"


def test_signature_ignores_annotations_but_not_defaults():
    a = "def f(x: int, y=1, *, z=None): pass"
    assert entry_signature(a, "f") == entry_signature("def f(x, y=1, *, z=None): pass", "f")
    assert entry_signature(a, "f") != entry_signature("def f(x, y=2, *, z=None): pass", "f")
    assert entry_signature(a, "g") is None


def test_absolute_imports_of_the_host_package_stay_in_the_checkout(tmp_path):
    from runners.extract import extraction_plan

    _write(tmp_path, {
        "src/eng/__init__.py": "",
        "src/eng/ops/__init__.py": "import every_op_there_is\n",
        "src/eng/ops/k.py": ("from eng.ops.utils import block\nfrom .tiles import tile\nimport torch\n\n"
                             "def k(x):\n    return block(x) + tile()\n\n"
                             "def debug(x):\n    from eng.profiler import dump\n    return dump(x)\n"),
        "src/eng/ops/utils.py": "def block(x):\n    return x\n",
        "src/eng/ops/tiles.py": "def tile():\n    return 1\n",
        "src/eng/profiler.py": "import not_installed\n",
    })
    plan = extraction_plan(tmp_path, "src/eng/ops/k.py", "k")
    assert plan.files == ["src/eng/ops/k.py", "src/eng/ops/tiles.py"]
    assert plan.host_files == ["src/eng/__init__.py", "src/eng/ops/__init__.py", "src/eng/ops/utils.py"]
    assert (plan.import_root, plan.package, plan.dotted) == ("src", "eng", "eng.ops.k")
    assert "src/eng/profiler.py" in extraction_plan(tmp_path, "src/eng/ops/k.py", "debug").host_files
    assert "src/eng/profiler.py" in extraction_plan(tmp_path, "src/eng/ops/k.py").host_files  # no entry: all


def test_a_missing_host_module_is_named(tmp_path):
    _write(tmp_path, {"eng/__init__.py": "", "eng/k.py": "import torch\nfrom eng.gone import f\n"})
    with pytest.raises(ExtractionError, match=r"eng/k.py line 2: `from eng.gone import \.\.\.` names the host "
                                              r"package `eng`, but there is no eng/gone.py"):
        local_imports(tmp_path, "eng/k.py")


def test_bundle_records_the_import_root_for_the_workers(tmp_path):
    _write(tmp_path / "repo", {"python/eng/__init__.py": "", "python/eng/k.py": "from eng.u import f\n",
                               "python/eng/u.py": "def f(): pass\n"})
    spec = TaskSpec(kernel="k", module="python/eng/k.py", entry="f", args=[], cases=[Case({"N": 4}, "float16")])
    build_bundle(tmp_path / "repo", spec, tmp_path / "bundle")
    back = read_task(tmp_path / "bundle")
    assert back.files == ["python/eng/k.py"] and back.import_paths == [str((tmp_path / "repo/python").resolve())]
