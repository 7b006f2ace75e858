"""Discovery: the Triton kernels of a repository, the functions that launch them and the tests that reach them.

Everything here reads source text with ``ast``; nothing of the target is imported or run. Names are resolved
through each file's imports (relative, absolute and package re-exports), so a kernel is found by its symbol
wherever its file now lives.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from evolver.launch_params import jit_kernels
from runners.policy import decorator_names as _decorators
from runners.extract import import_root
from runners.syntax import parse

TRITON_DECORATORS = frozenset({"jit", "autotune", "heuristics"})
# other compilers' `@jit` (LMDeploy mixes TileLang kernels with its Triton ones): not Triton kernels
FOREIGN_JIT = frozenset({"tilelang", "numba", "jax", "cupy", "taichi", "tvm", "mlx", "cuda", "warp"})
SKIP_DIRS = frozenset({".git", ".venv", "venv", "env", "node_modules", "build", "dist", "__pycache__",
                       "site-packages", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".eggs"})
Symbol = tuple[str, str]  # (file relative to the root, top-level name)


def is_test_file(rel: str) -> bool:
    path = PurePosixPath(rel)
    return (path.name.startswith("test_") or path.stem.endswith("_test") or path.name == "conftest.py"
            or any(p in ("test", "tests") for p in path.parts[:-1]))


@dataclass
class _File:
    rel: str
    dotted: str
    tree: ast.Module
    kernels: dict[str, tuple[int, bool]] = field(default_factory=dict)  # name -> (line, autotuned)
    wrappers: dict[str, str] = field(default_factory=dict)  # kernel -> a decorator of its own (pointwise_dynamic)
    defs: dict[str, ast.AST] = field(default_factory=dict)
    bindings: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # local -> (dotted, symbol)
    star: list[str] = field(default_factory=list)  # modules re-exported by `from x import *`, in order


@dataclass
class Launch:
    kernel: Symbol
    function: str  # launching function: `name` or `Class.method`
    owner: Symbol  # the top-level symbol holding it
    line: int
    via: str | None = None  # a decorator that makes its own launcher, when the kernel is called like a function


@dataclass
class ScanRow:
    kernel: str
    file: str
    line: int
    autotuned: bool
    entry: str | None = None  # `file:function`
    launcher: str | None = None
    tests: list[str] = field(default_factory=list)
    configured: str | None = None  # the config's name for it
    missing: list[str] = field(default_factory=list)

    @property
    def entry_file(self) -> str | None:
        return self.entry.split(":")[0] if self.entry else None

    @property
    def entry_name(self) -> str | None:
        return self.entry.split(":")[1] if self.entry else None


class RepoIndex:
    """Every Python file of the repository, parsed once, with kernels, launches and a reference graph."""

    def __init__(self, root: Path, only: list[str] | None = None):
        self.root = Path(root).resolve()
        self.only = only  # files or folders (relative) to read; None or "" reads the whole repository
        self.files: dict[str, _File] = {}
        self.by_dotted: dict[str, str] = {}
        self.unparsed: list[str] = []
        for path in sorted(self._python_files()):
            rel = path.relative_to(self.root).as_posix()
            try:
                tree = parse(path.read_text(errors="replace"), filename=rel)
            except (SyntaxError, ValueError):
                self.unparsed.append(rel)
                continue
            dotted = import_root(self.root, rel)[2]
            f = _File(rel, dotted, tree)
            self._read(f)
            self.files[rel] = f
            self.by_dotted.setdefault(dotted.removesuffix(".__init__"), rel)
        self.launches: list[Launch] = []
        self.refs: dict[Symbol, set[Symbol]] = defaultdict(set)
        for f in self.files.values():
            self._link(f)

    def _python_files(self):
        if self.only is not None and "" not in self.only:
            starts = [self.root / p for p in self.only]
            yield from (p for p in starts if p.is_file() and p.suffix == ".py")
            stack = [p for p in starts if p.is_dir()]
        else:
            stack = [self.root]
        while stack:
            d = stack.pop()
            for p in d.iterdir():
                if p.is_dir() and p.name not in SKIP_DIRS and not p.is_symlink():
                    stack.append(p)
                elif p.suffix == ".py" and p.is_file():
                    yield p

    def _read(self, f: _File) -> None:
        package = f.dotted.rsplit(".", 1)[0] if "." in f.dotted else ""
        if f.rel.endswith("__init__.py"):
            package = f.dotted.removesuffix(".__init__")
        for node in ast.walk(f.tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".") if package else []
                    parts = parts[:len(parts) - node.level + 1] if node.level > 1 else parts
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for a in node.names:
                    if a.name == "*":
                        f.star.append(base)
                    else:
                        f.bindings[a.asname or a.name] = (base, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    f.bindings[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
        for node in f.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                f.defs[node.name] = node
        f.kernels = {name: (f.defs[name].lineno, autotuned) for name, autotuned in jit_kernels(f.tree).items()
                     if not self._foreign_jit(f, f.defs[name])}
        for name in f.kernels:
            own = [n for n in _decorators(f.defs[name]) if n not in TRITON_DECORATORS]
            if own:
                f.wrappers[name] = own[0]

    @staticmethod
    def _foreign_jit(f: _File, node: ast.FunctionDef) -> bool:
        """``@tilelang.jit(...)``, ``@numba.jit`` or ``from tilelang import jit``: another compiler's kernel."""
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            root = target
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and (target is root and root.id == "jit" or getattr(target, "attr", "") == "jit"):
                module = f.bindings.get(root.id, (root.id, None))[0]
                if module.split(".")[0] in FOREIGN_JIT:
                    return True
        return False

    def resolve(self, rel: str, name: str, attr: str | None = None, depth: int = 0) -> Symbol | None:
        """The top-level symbol that ``name`` (or ``name.attr``) means in file ``rel``."""
        f = self.files.get(rel)
        if f is None or depth > 6:
            return None
        if name in f.defs:
            return (rel, name)
        if name not in f.bindings:  # a package's `from .ops import *` re-exports: the last one wins, as in Python
            for module in reversed(f.star):
                found = self.resolve(self.by_dotted.get(module), name, attr, depth + 1)
                if found:
                    return found
            return None
        module, symbol = f.bindings[name]
        if symbol is None:  # `import a.b as m` -> m.attr
            target = self.by_dotted.get(module)
            return self.resolve(target, attr, None, depth + 1) if target and attr else None
        sub = self.by_dotted.get(f"{module}.{symbol}")  # `from pkg import module`
        if sub and attr:
            return self.resolve(sub, attr, None, depth + 1)
        target = self.by_dotted.get(module)
        return self.resolve(target, symbol, None, depth + 1) if target else None

    def _link(self, f: _File) -> None:
        owners = [(name, node) for name, node in f.defs.items()]
        for name, node in owners:
            host = name not in f.kernels  # a call inside a @triton.jit function is a device call, not a launch
            for inner, function in self._walk_functions(node, name):
                for ref in self._refs_in(f, inner):
                    if ref != (f.rel, name):
                        self.refs[(f.rel, name)].add(ref)
                if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Subscript):
                    kernel = self._callee(f, inner.func.value)
                    if kernel and kernel[1] in self.files[kernel[0]].kernels:
                        self.launches.append(Launch(kernel, function, (f.rel, name), inner.lineno))
                elif host and isinstance(inner, ast.Call):  # `add_func(x, y)`: a decorator made it callable
                    kernel = self._callee(f, inner.func)
                    via = kernel and self.files[kernel[0]].wrappers.get(kernel[1])
                    if via:
                        self.launches.append(Launch(kernel, function, (f.rel, name), inner.lineno, via))
        module_level = [n for n in f.tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                     ast.ClassDef))]
        for node in module_level:  # module-level code (tests call things there too)
            for ref in self._refs_in(f, node):
                self.refs[(f.rel, "<module>")].add(ref)

    @staticmethod
    def _walk_functions(node: ast.AST, owner: str):
        """(node, enclosing function name) for every node under a top-level definition."""
        stack = [(node, owner)]
        while stack:
            n, fn = stack.pop()
            yield n, fn
            for child in ast.iter_child_nodes(n):
                name = fn
                if isinstance(n, ast.ClassDef) and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{owner}.{child.name}"
                stack.append((child, name))

    def _callee(self, f: _File, node: ast.expr) -> Symbol | None:
        if isinstance(node, ast.Name):
            return self.resolve(f.rel, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return self.resolve(f.rel, node.value.id, node.attr)
        return None

    def _refs_in(self, f: _File, node: ast.AST) -> set[Symbol]:
        out = set()
        if isinstance(node, ast.Name):
            sym = self.resolve(f.rel, node.id)
            if sym:
                out.add(sym)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            sym = self.resolve(f.rel, node.value.id, node.attr)
            if sym:
                out.add(sym)
        elif isinstance(node, ast.ImportFrom):  # `from pkg.mod import entry` in a test is a reference too
            for a in node.names:
                sym = self.resolve(f.rel, a.asname or a.name)
                if sym:
                    out.add(sym)
        return out

    def callers(self, target: Symbol) -> set[Symbol]:
        """Every symbol (and module body) that reaches ``target`` through references."""
        if not hasattr(self, "_reverse"):
            self._reverse: dict[Symbol, set[Symbol]] = defaultdict(set)
            for src, dsts in self.refs.items():
                for d in dsts:
                    self._reverse[d].add(src)
        reverse = self._reverse
        seen, todo = {target}, [target]
        while todo:
            for src in reverse.get(todo.pop(), ()):
                if src not in seen:
                    seen.add(src)
                    todo.append(src)
        return seen

    def tests_reaching(self, target: Symbol) -> list[str]:
        return sorted({rel for rel, _ in self.callers(target) if is_test_file(rel) and rel != target[0]})

    def find_symbol(self, name: str) -> list[tuple[str, int]]:
        """Files that define ``name`` at top level (tests and unparsable files left out)."""
        return [(rel, f.defs[name].lineno) for rel, f in self.files.items()
                if name in f.defs and not is_test_file(rel)]


def _public_caller(index: RepoIndex, symbol: Symbol) -> str | None:
    """The first public module-level function of ``symbol``'s file that reaches it (``Fn.apply`` callers)."""
    rel = symbol[0]
    reaching = [s for s in index.callers(symbol) if s[0] == rel and s[1] != "<module>" and not s[1].startswith("_")
                and isinstance(index.files[rel].defs.get(s[1]), ast.FunctionDef)]
    return min(reaching, key=lambda s: index.files[rel].defs[s[1]].lineno)[1] if reaching else None


def _entry_for(index: RepoIndex, launch: Launch) -> tuple[str | None, str]:
    """(public module-level function of the launching file that reaches the launch, or None; why not)."""
    rel, owner = launch.owner
    node = index.files[rel].defs[owner]
    if isinstance(node, ast.ClassDef):
        method = launch.function.rsplit(".", 1)[-1]
        if "backward" in method:
            return None, (f"launched from {launch.function}: reached only through autograd's backward pass, and "
                          "kernelsmith calls an entry forward; wrap the backward launch in a function to optimise it")
        caller = _public_caller(index, launch.owner)  # `def cross_entropy_loss(...): return Fn.apply(...)`
        if caller:
            return caller, ""
        return None, f"launched from method {launch.function}: name a function that calls it as `entry:`"
    if not owner.startswith("_"):
        return owner, ""
    reaching = [s for s in index.callers(launch.owner) if s[0] == rel and s[1] != "<module>"
                and not s[1].startswith("_") and isinstance(index.files[rel].defs.get(s[1]), ast.FunctionDef)]
    if reaching:
        return min(reaching, key=lambda s: index.files[rel].defs[s[1]].lineno)[1], ""
    return owner, f"the launcher {owner} is private and no public function of its file calls it"


def is_benchmark(rel: str) -> bool:
    """A benchmark or tuning script (``benchmark/test_fused_perf.py``, ``test/kernel/x_tuning.py``): it may call
    the entry, but it checks no result."""
    words = [p.lower() for p in PurePosixPath(rel).parts]
    return any(w.startswith(("bench", "perf", "profil")) for w in words[:-1]) \
        or any(w in PurePosixPath(words[-1]).stem for w in ("bench", "perf", "tuning", "profil"))


_GENERIC_WORDS = frozenset({"test", "tests", "kernel", "kernels", "triton", "op", "ops", "cuda", "utils", "impl",
                            "fused", "fwd", "bwd", "forward", "backward", "py"})


def _words(name: str) -> set[str]:
    return {w for w in name.lower().replace("-", "_").split("_") if w and w not in _GENERIC_WORDS}


def named_after(row: ScanRow, test: str) -> int:
    """How many words the test file's name shares with the kernel's file and entry (``test_apply_rotary.py``
    and ``apply_rotary_pos_emb.py``: 2; ``test_dsa_indexer_preprocess.py``, which only uses it as a helper: 0)."""
    source = Path(row.entry_file or row.file).stem
    return len(_words(Path(test).stem) & (_words(source) | _words(row.entry_name or "")))


def collected(rel: str) -> bool:
    """A file pytest collects by default (``test_*.py``, ``*_test.py``); a helper module of a test package
    (SGLang's ``python/sglang/test/lora_utils.py``, ``runners.py``) reaches half the engine through its imports
    and tests nothing itself."""
    name = PurePosixPath(rel).name
    return name.startswith("test_") or name.endswith("_test.py")


def closeness(row: ScanRow, test: str, root: Path | None) -> tuple:
    """Closest first: a test that names the entry, then one whose file name shares the most words with the
    kernel's file and entry, then one that names its module, then one named after its file, then one pytest
    collects; benchmark and tuning scripts after every other test."""
    source = Path(row.entry_file or row.file)
    text = (Path(root) / test).read_text(errors="replace") if root and (Path(root) / test).is_file() else ""
    return (is_benchmark(test), bool(row.entry_name) and row.entry_name not in text, -named_after(row, test),
            f".{source.stem}" not in text and f"/{source.stem}" not in text, source.stem not in Path(test).stem,
            Path(test).name == "conftest.py", not collected(test), not {"test", "tests"} & set(Path(test).parts[:-1]),
            len(Path(test).parts), test)


def scan(root: Path, configured: dict[str, tuple[str, str]] | None = None,
         index: RepoIndex | None = None) -> list[ScanRow]:
    """One row per kernel. ``configured`` maps config names to (path, entry) to mark what is set up."""
    index = index or RepoIndex(root)
    by_entry = {(p, e): name for name, (p, e) in (configured or {}).items()}
    by_symbol = {e: name for name, (p, e) in (configured or {}).items()}
    launches: dict[Symbol, list[Launch]] = defaultdict(list)
    for launch in index.launches:
        launches[launch.kernel].append(launch)
    rows = []
    for rel, f in index.files.items():
        if is_test_file(rel):
            continue
        for kernel, (line, autotuned) in f.kernels.items():
            row = ScanRow(kernel=kernel, file=rel, line=line, autotuned=autotuned)
            sites = launches.get((rel, kernel), [])
            if not sites:
                row.missing.append("never launched (a helper @triton.jit function, or launched elsewhere)")
                rows.append(row)
                continue
            launch = min(sites, key=lambda s: (s.owner[0] != rel, s.line))
            row.launcher = f"{launch.owner[0]}:{launch.function}"
            entry, why = _entry_for(index, launch)
            if entry:
                row.entry = f"{launch.owner[0]}:{entry}"
                row.tests = sorted(index.tests_reaching((launch.owner[0], entry)),
                                   key=lambda t: closeness(row, t, index.root))
                row.configured = by_entry.get((launch.owner[0], entry)) or by_symbol.get(entry)
                if not row.tests:
                    row.missing.append(f"no test reaches {entry}")
            if why:
                row.missing.append(why)
            if launch.via:
                row.missing.append(f"called through its decorator @{launch.via}, which makes the launch itself: the "
                                   "launch tuner finds no knobs there (an LLM rewrite can still change the kernel)")
            if row.entry and not row.configured:
                row.missing.append("not in .github/kernelsmith.yml (kernelsmith init writes a proposal)")
            rows.append(row)
    return sorted(rows, key=lambda r: (r.file, r.line))


def format_table(rows: list[ScanRow]) -> str:
    header = ("kernel", "entry", "test", "missing")
    lines = [header]
    for r in rows:
        test = r.tests[0] + (f" (+{len(r.tests) - 1})" if len(r.tests) > 1 else "") if r.tests else "-"
        kernel = f"{r.kernel}{' [autotune]' if r.autotuned else ''}"
        entry = r.entry or "-"
        status = "; ".join(r.missing) or (f"ready (config: {r.configured})" if r.configured else "ready")
        lines.append((kernel, entry, test, status))
    widths = [min(60, max(len(line[i]) for line in lines)) for i in range(3)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line[:3], widths)) + "  " + line[3] for line in lines)
