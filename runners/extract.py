"""Extraction: copy a kernel module and the local helpers it imports into a self-contained bundle.

Only relative imports (``from .utils import x``, ``from . import utils``) are followed: they are how
LMDeploy- and SGLang-style kernel packages reach their helpers, and they keep working when the files are
placed under another top-level package. Package ``__init__`` files are not copied (they tend to import the
whole engine); empty ones are made instead when the bundle is imported.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path, PurePosixPath

from .task import BASELINE_DIR, TaskSpec, write_task


class ExtractionError(Exception):
    pass


def _resolve(module_rel: PurePosixPath, level: int, dotted: str | None) -> PurePosixPath:
    """The package directory a relative import points at (``level`` dots from the module's package)."""
    base = module_rel.parent
    for _ in range(level - 1):
        if base == PurePosixPath("."):
            raise ExtractionError(f"{module_rel}: relative import goes above the repository root")
        base = base.parent
    return base.joinpath(*dotted.split(".")) if dotted else base


def local_imports(root: Path, module_rel: str) -> list[str]:
    """Files (relative to ``root``) reached from ``module_rel`` by relative imports, transitively."""
    seen: list[str] = []
    todo = [module_rel]
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        path = root / rel
        try:
            tree = ast.parse(path.read_text(), filename=str(path))
        except SyntaxError as exc:
            raise ExtractionError(f"{rel} does not parse: {exc.msg} (line {exc.lineno})") from exc
        seen.append(rel)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            target = _resolve(PurePosixPath(rel), node.level, node.module)
            candidates = [target.with_suffix(".py")] if node.module else []
            # ``from . import utils`` names modules, ``from .utils import x`` names attributes of one.
            candidates += [target / f"{alias.name}.py" for alias in node.names]
            found = [str(c) for c in candidates if (root / c).is_file()]
            if not found and not (root / target / "__init__.py").is_file():
                raise ExtractionError(
                    f"{rel} line {node.lineno}: cannot find the local module for "
                    f"`from {'.' * node.level}{node.module or ''} import ...` under {root}"
                )
            todo.extend(found)
    return seen


def build_bundle(root: Path, spec: TaskSpec, bundle: Path) -> TaskSpec:
    """Write ``bundle`` (task.yaml + baseline/) for the kernel module ``spec.module`` of the repo at ``root``."""
    root = Path(root)
    if not (root / spec.module).is_file():
        raise ExtractionError(f"kernel module {spec.module} not found in {root}")
    files = local_imports(root, spec.module)
    baseline = Path(bundle) / BASELINE_DIR
    if baseline.exists():
        shutil.rmtree(baseline)
    for rel in files:
        dest = baseline / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, dest)
    spec.files = files
    write_task(Path(bundle), spec)
    return spec


def entry_signature(source: str, entry: str) -> str | None:
    """The entry function's parameters (names, kinds, defaults; annotations ignored) as text, for
    'public signature unchanged' checks."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    arg.annotation = None
            return ast.unparse(args)
    return None
