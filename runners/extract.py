"""Extraction: copy a kernel module and the local helpers it imports into a self-contained bundle.

Relative imports (``from .utils import x``, ``from . import utils``) are followed and those files are copied:
they keep working when the files are placed under another top-level package. Absolute imports of the host
package (``from sglang.srt.utils import x``) are not copied: they resolve against the target checkout (its
import root goes on the workers' ``sys.path``, ``TaskSpec.import_paths``) or the target's installed package.
Package ``__init__`` files are not copied (they tend to import the whole engine); empty ones are made instead.

Imports at module level run when the module is imported, so they are always followed. A function-local (lazy)
import is followed only when the entry reaches that function, through the functions and kernels it names.
"""
from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .syntax import parse
from .task import BASELINE_DIR, REFERENCE_DIR, TaskSpec, write_task


class ExtractionError(Exception):
    pass


@dataclass
class ExternalImport:
    """An absolute import of something outside the host package (torch, triton, or a third party)."""

    module: str
    file: str
    line: int


@dataclass
class Extraction:
    files: list[str]  # copied into the bundle: the module and the helpers reached by relative imports
    host_files: list[str] = field(default_factory=list)  # host-package files imported absolutely (not copied)
    import_root: str = "."  # the folder, relative to the root, that holds the host package
    package: str | None = None  # the host package's top-level name
    dotted: str = ""  # the kernel module's import name in the target
    external: list[ExternalImport] = field(default_factory=list)


def import_root(root: Path, module_rel: str) -> tuple[str, str | None, str]:
    """(import root, top-level package, dotted module name) of ``module_rel``: the top package is the highest
    folder above the module that holds an ``__init__.py``, and every folder between it and the module is a
    package too, with or without one (an implicit namespace package: SGLang's ``python/sglang/__init__.py``
    over ``srt/`` and ``srt/layers/``, which have none, over ``layers/quantization/__init__.py``)."""
    parts = PurePosixPath(module_rel).with_suffix("").parts
    depth = len(parts) - 1
    for above in range(1, len(parts)):
        if (Path(root).joinpath(*parts[:above]) / "__init__.py").is_file():
            depth = above - 1
            break
    base = "/".join(parts[:depth]) or "."
    package = parts[depth] if depth < len(parts) - 1 else None
    return base, package, ".".join(parts[depth:])


def _resolve(module_rel: PurePosixPath, level: int, dotted: str | None) -> PurePosixPath:
    """The package directory a relative import points at (``level`` dots from the module's package)."""
    base = module_rel.parent
    for _ in range(level - 1):
        if base == PurePosixPath("."):
            raise ExtractionError(f"{module_rel}: relative import goes above the repository root")
        base = base.parent
    return base.joinpath(*dotted.split(".")) if dotted else base


class _Module:
    """One parsed file: its module-level definitions and which local names its imports bind."""

    def __init__(self, root: Path, rel: str):
        path = root / rel
        try:
            self.tree = parse(path.read_text(), filename=str(path))
        except SyntaxError as exc:
            raise ExtractionError(f"{rel} does not parse: {exc.msg} (line {exc.lineno})") from exc
        self.defs: dict[str, ast.AST] = {}
        self.top_imports: list[ast.Import | ast.ImportFrom] = []
        self.import_time: list[ast.AST] = []  # what runs at import: statements, decorators, default values
        self._scan(self.tree.body)

    def _scan(self, body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs[node.name] = node
                self.import_time += [*node.decorator_list, *node.args.defaults,
                                     *[d for d in node.args.kw_defaults if d is not None]]
            elif isinstance(node, ast.ClassDef):
                self.defs[node.name] = node
                self.import_time += [*node.decorator_list, *node.bases]
                self._scan([n for n in node.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))])
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self.top_imports.append(node)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):  # guarded imports still run at import
                self.import_time += [getattr(node, "test", None) or ast.Pass()]
                # `if TYPE_CHECKING:` never runs (SGLang's moriep.py names a module its sdist lacks there)
                skip = ("body",) if isinstance(node, ast.If) and _type_checking(node.test) else ()
                for part in ("body", "orelse", "finalbody", "handlers"):
                    if part in skip:
                        continue
                    for child in getattr(node, part, []):
                        self._scan(child.body if isinstance(child, ast.ExceptHandler) else [child])
            else:
                self.import_time.append(node)


def _type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``: true for type checkers only, never when the module runs."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Walker:
    def __init__(self, root: Path, module_rel: str, entry: str | None):
        self.root = Path(root)
        self.base, self.package, self.dotted = import_root(self.root, module_rel)
        self.module_rel = module_rel
        self.entry = entry
        self.modules: dict[str, _Module] = {}
        self.copied: list[str] = []
        self.host: list[str] = []
        self.external: list[ExternalImport] = []
        self.reached: set[tuple[str, str | None]] = set()
        # rel -> local name -> (file, symbol or None for a module, whether that file is copied)
        self.bindings: dict[str, dict[str, tuple[str, str | None, bool]]] = {}

    def module(self, rel: str) -> _Module:
        if rel not in self.modules:
            self.modules[rel] = _Module(self.root, rel)
            self.bindings[rel] = {}
        return self.modules[rel]

    def run(self) -> Extraction:
        todo: list[tuple[str, str | None, bool]] = [(self.module_rel, None, True)]
        if self.entry:
            todo.append((self.module_rel, self.entry, True))
        while todo:
            rel, name, copied = todo.pop(0)  # first in, first out: a module's imports bind before its functions run
            if (rel, name) in self.reached:
                continue
            self.reached.add((rel, name))
            mod = self.module(rel)
            group = self.copied if copied else self.host
            if rel not in group:
                group.append(rel)
            if name is None:  # the module is imported: its module-level imports and statements run
                for node in mod.top_imports:
                    todo += self.follow(rel, node, copied)
                for node in mod.import_time:
                    todo += self.names_used(rel, node, copied)
                if rel == self.module_rel and not self.entry:  # no entry named: every function counts
                    todo += [(rel, n, copied) for n in mod.defs]
                continue
            node = mod.defs.get(name)
            if node is None:
                continue
            for inner in ast.walk(node):  # lazy imports in the reached function, then what it names
                if isinstance(inner, (ast.Import, ast.ImportFrom)) and inner is not node:
                    todo += self.follow(rel, inner, copied)
            todo += self.names_used(rel, node, copied)
        return Extraction(files=self.copied, host_files=self.host, import_root=self.base, package=self.package,
                          dotted=self.dotted, external=self.external)

    def names_used(self, rel: str, node: ast.AST, copied: bool) -> list[tuple[str, str | None, bool]]:
        mod, binds, out = self.modules[rel], self.bindings[rel], []
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name):
                if inner.id in mod.defs and inner.id != getattr(node, "name", None):
                    out.append((rel, inner.id, copied))
                elif inner.id in binds:
                    out.append(binds[inner.id])
            elif isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and inner.value.id in binds:
                target, symbol, was_copied = binds[inner.value.id]
                if symbol is None:  # `utils.helper` where utils is a module
                    out.append((target, inner.attr, was_copied))
        return out

    def follow(self, rel: str, node: ast.Import | ast.ImportFrom, copied: bool) -> list[tuple[str, str | None, bool]]:
        if isinstance(node, ast.ImportFrom) and node.level:
            return self.follow_relative(rel, node, copied)
        names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        out = []
        for dotted in names:
            top = (dotted or "").split(".")[0]
            if self.package and top == self.package:
                out += self.follow_host(rel, node, dotted, copied)
            elif top:
                self.external.append(ExternalImport(dotted, rel, node.lineno))
        return out

    def follow_relative(self, rel: str, node: ast.ImportFrom, copied: bool) -> list[tuple[str, str | None, bool]]:
        target = _resolve(PurePosixPath(rel), node.level, node.module)
        out: list[tuple[str, str | None, bool]] = []
        module_file = target.with_suffix(".py") if node.module else None
        found = False
        if module_file and (self.root / module_file).is_file():
            found = True
            out.append((str(module_file), None, copied))
            for alias in node.names:
                self.bindings[rel][alias.asname or alias.name] = (str(module_file), alias.name, copied)
        for alias in node.names:  # ``from . import utils`` names modules
            sub = target / f"{alias.name}.py"
            if (self.root / sub).is_file():
                found = True
                self.bindings[rel][alias.asname or alias.name] = (str(sub), None, copied)
                out.append((str(sub), None, copied))
        if not found and not (self.root / target / "__init__.py").is_file() and not (self.root / target).is_dir():
            raise ExtractionError(f"{rel} line {node.lineno}: cannot find the local module for "
                                  f"`from {'.' * node.level}{node.module or ''} import ...` under {self.root}")
        return out

    def follow_host(self, rel: str, node: ast.Import | ast.ImportFrom, dotted: str,
                    copied: bool = True) -> list[tuple[str, str | None, bool]]:
        base = self.root / self.base if self.base != "." else self.root
        prefix = "" if self.base == "." else self.base + "/"
        parts = dotted.split(".")
        for depth in range(1, len(parts)):  # package __init__ files run on the way, in the checkout
            init = f"{prefix}{'/'.join(parts[:depth])}/__init__.py"
            if (self.root / init).is_file() and init not in self.host:
                self.host.append(init)
        file = f"{prefix}{'/'.join(parts)}.py"
        out: list[tuple[str, str | None, bool]] = []
        if (self.root / file).is_file():
            out.append((file, None, False))
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    self.bindings[rel][alias.asname or alias.name] = (file, alias.name, False)
            else:
                for alias in node.names:
                    if alias.asname:
                        self.bindings[rel][alias.asname] = (file, None, False)
            return out
        package_dir = base.joinpath(*parts)
        if not (package_dir / "__init__.py").is_file() and not package_dir.is_dir():
            if not copied:  # deep in the checkout's package, perhaps guarded (`try: ... except ImportError`): left
                return out  # to Python, and to the import check, which names the line if it really fails
            shown = f"from {dotted} import ..." if isinstance(node, ast.ImportFrom) else f"import {dotted}"
            raise ExtractionError(f"{rel} line {node.lineno}: `{shown}` names the host package `{self.package}`, "
                                  f"but there is no {file} nor {prefix}{'/'.join(parts)}/__init__.py in {self.root}")
        init = f"{prefix}{'/'.join(parts)}/__init__.py"
        if (self.root / init).is_file() and init not in self.host:  # none: an implicit namespace package
            self.host.append(init)
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:  # ``from pkg.ops import utils`` may name a module, or a package
                sub = f"{prefix}{'/'.join(parts)}/{alias.name}.py"
                sub_init = f"{prefix}{'/'.join(parts)}/{alias.name}/__init__.py"
                for module in (sub, sub_init):
                    if (self.root / module).is_file():
                        self.bindings[rel][alias.asname or alias.name] = (module, None, False)
                        out.append((module, None, False))
                        break
        return out


def extraction_plan(root: Path, module_rel: str, entry: str | None = None) -> Extraction:
    """What a bundle for ``module_rel`` copies, and what it reaches in the checkout (see the module doc)."""
    return _Walker(Path(root), module_rel, entry).run()


def local_imports(root: Path, module_rel: str, entry: str | None = None) -> list[str]:
    """Files (relative to ``root``) copied for ``module_rel``: the module and its relative imports."""
    return extraction_plan(root, module_rel, entry).files


def build_bundle(root: Path, spec: TaskSpec, bundle: Path) -> TaskSpec:
    """Write ``bundle`` (task.yaml + baseline/) for the kernel module ``spec.module`` of the repo at ``root``.

    ``spec.import_paths`` gets the checkout's import root when the module reaches its host package."""
    root = Path(root)
    if not (root / spec.module).is_file():
        raise ExtractionError(f"kernel module {spec.module} not found in {root}")
    plan = extraction_plan(root, spec.module, spec.entry)
    baseline = Path(bundle) / BASELINE_DIR
    if baseline.exists():
        shutil.rmtree(baseline)
    for rel in plan.files:
        dest = baseline / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, dest)
    spec.files = plan.files
    if plan.host_files and not spec.import_paths:
        spec.import_paths = [str((root / plan.import_root).resolve())]
    write_task(Path(bundle), spec)
    return spec


def entry_signature(source: str, entry: str) -> str | None:
    """The entry function's parameters (names, kinds, defaults; annotations ignored) as text, for
    'public signature unchanged' checks."""
    for node in parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    arg.annotation = None
            return ast.unparse(args)
    return None


def copy_reference(root: Path, bundle: Path, reference: str | None, config_dir: Path | None = None) -> None:
    """Copy the reference's file into ``bundle/reference/`` (from the repository, or beside the config)."""
    if not reference:
        return
    file = reference.split(":")[0]
    for base in (Path(root), config_dir):
        if base is not None and (Path(base) / file).is_file():
            dest = Path(bundle) / REFERENCE_DIR / file
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(base) / file, dest)
            return
    raise FileNotFoundError(f"reference file {file} not found in {root}" + (f" or {config_dir}" if config_dir else ""))
