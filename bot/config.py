"""The target's `.github/kernelsmith.yml`: which kernels to optimise, their tests, inputs and tolerances.

Validation errors name the file and line, so a maintainer can fix the config without reading our code.
"""
from __future__ import annotations

import itertools
import shlex
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from runners.shapes import eval_dim
from runners.task import ArgSpec, Case, TaskSpec, Tolerance

from .errors import UserError
from .repo_tests import parse_test

CONFIG_PATH = ".github/kernelsmith.yml"
Dtype = Literal["float16", "bfloat16", "float32"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


ArgDtype = Literal["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


class ArgConfig(_Strict):
    shape: list[int | str] | None = None
    dtype: ArgDtype | None = None
    dist: Literal["normal", "uniform"] = "normal"
    scale: float = 1.0
    low: float = -1.0
    high: float = 1.0
    value: Any = None
    when: str | None = None
    range: list[int | float] | None = Field(default=None, min_length=2, max_length=2)  # drawn per trial; ints stay ints
    # an int or a list of ints computed from the shape symbols per case: `normalized_shape: {size: [H]}`
    size: int | str | list[int | str] | None = None
    vary: bool = True  # tensors: scales across orders of magnitude and structured rows per trial

    @model_validator(mode="after")
    def _tensor_or_scalar(self):
        given = ["value"] * ("value" in self.model_fields_set) + ["range"] * (self.range is not None) \
            + ["size"] * (self.size is not None)
        if self.shape is None and not given:
            raise ValueError("an argument needs either `shape` (a tensor), `value` or `range` (a scalar), or `size` "
                             "(sizes from the shape symbols)")
        if self.shape is not None and given:
            raise ValueError(f"an argument has `shape` or `{given[0]}`, not both")
        if len(given) > 1:
            raise ValueError(f"an argument has one of `value`, `range` and `size`, not {' and '.join(given)}")
        if self.range is not None and self.range[0] > self.range[1]:
            raise ValueError("`range` is [low, high] with low <= high")
        return self


class ToleranceConfig(_Strict):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


class TestConfig(_Strict):
    """The mapping form of `test:`; it is stored as the equivalent one-line string."""

    path: str | list[str] | None = None
    k: str | None = None
    command: str | None = None

    @model_validator(mode="after")
    def _one_form(self):
        if (self.path is None) == (self.command is None):
            raise ValueError("`test` takes either `path` (pytest paths or node ids, with an optional `k`) "
                             "or `command`")
        if self.command is not None and self.k is not None:
            raise ValueError("`k` goes with `path`; put `-k` into the command itself")
        return self

    def as_text(self) -> str:
        if self.command is not None:
            return self.command
        paths = [self.path] if isinstance(self.path, str) else list(self.path)
        return shlex.join([*paths, *(["-k", self.k] if self.k else [])])


class KernelConfig(_Strict):
    path: str
    entry: str
    test: str  # a pytest path or node id (with -k), or a command; the mapping form is turned into this text
    python: str | None = None  # overrides the top-level `python:` for this kernel
    capture: bool = True  # run the test once and add the entry's recorded calls as cases
    captured_cases: int = Field(default=6, ge=0, le=64)  # at most this many captured cases are kept
    backends: list[Literal["triton"]] = ["triton"]
    dtypes: list[Dtype] = Field(default_factory=lambda: ["float16"], min_length=1)
    tolerances: dict[Dtype, ToleranceConfig] = {}
    written: list[str] = []
    args: dict[str, ArgConfig] = Field(min_length=1)
    shapes: list[dict[str, int | bool]] = Field(min_length=1)
    smoke_shapes: list[dict[str, int | bool]] = []
    # "file.py:function": a plain torch version of the op (in the repository, or beside the config), timed
    # through torch.compile as a peer column in the report
    reference: str | None = Field(default=None, pattern=r"^[\w./-]+\.py:\w+$")

    @field_validator("test", mode="before")
    @classmethod
    def _test_text(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return TestConfig.model_validate(v).as_text()
        return v

    @field_validator("path")
    @classmethod
    def _relative(cls, v: str) -> str:
        if v.startswith("/") or ".." in Path(v).parts:
            raise ValueError("must be a path relative to the repository root")
        return v

    @field_validator("test")
    @classmethod
    def _test_parses(cls, v: str) -> str:
        parse_test(v)  # raises ValueError with the reason
        return v

    @model_validator(mode="after")
    def _consistent(self):
        unknown = set(self.written) - set(self.args)
        if unknown:
            raise ValueError(f"`written` names arguments that are not in `args`: {sorted(unknown)}")
        for shapes in (self.shapes, self.smoke_shapes):
            for symbols in shapes:
                for name, arg in self.args.items():
                    dims = arg.shape if arg.shape is not None else _as_list(arg.size)
                    if dims is None or (arg.when and not symbols.get(arg.when)):
                        continue
                    try:
                        [eval_dim(d, symbols) for d in dims]
                    except (KeyError, ValueError, SyntaxError) as exc:
                        raise ValueError(f"shape {symbols}: argument `{name}`: {exc}") from None
        return self


class Config(_Strict):
    version: Literal[1] = 1
    # The interpreter that runs the workers and the tests: a path (relative to the repository root, or
    # absolute), a virtual environment's folder, or a command on PATH. Default: kernelsmith's own Python.
    python: str | None = None
    env: dict[str, str] = {}  # extra environment variables for the repository's tests and the capture run
    kernels: dict[str, KernelConfig] = Field(min_length=1)
    # The GitHub App (bot/app), in the style of dependabot.yml: scheduled scans, open-PR limit, PR labels, drafts.
    schedule: dict[Literal["interval"], Literal["hourly", "daily", "weekly"]] | None = None
    open_pull_requests_limit: int = Field(default=5, ge=0)
    labels: list[str] = []
    draft: bool = False

    def python_for(self, kernel: KernelConfig) -> str | None:
        return kernel.python or self.python


def _line_of(node: yaml.Node | None, loc: tuple) -> int | None:
    """The YAML line of the deepest node on ``loc`` that exists (1-based)."""
    line = node.start_mark.line + 1 if node else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(key)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            break
        if node is None:
            break
        line = node.start_mark.line + 1
    return line


def parse_config(text: str, where: str = CONFIG_PATH) -> Config:
    try:
        data = yaml.safe_load(text)
        tree = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark else ""
        raise UserError(f"{where}{at} is not valid YAML ({getattr(exc, 'problem', exc)})",
                        "Fix the YAML syntax; the README's 'Config format' section shows a complete example.") from None
    try:
        return Config.model_validate(data if data is not None else {})
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:5]:
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
            line = _line_of(tree, loc)
            path = ".".join(map(str, loc)) or "(top level)"
            problems.append(f"line {line} ({path}): {err['msg']}" if line else f"{path}: {err['msg']}")
        raise UserError(f"{where} is invalid: " + "; ".join(problems),
                        "Correct those entries; the README's 'Config format' section lists every key.") from None


def load_config(root: Path) -> Config:
    path = Path(root) / CONFIG_PATH
    if not path.is_file():
        raise UserError(f"no {CONFIG_PATH} in {root}",
                        f"Add one that names the kernels to optimise (see the README's 'Config format', or "
                        f"examples/tinyserve/{CONFIG_PATH}).")
    return parse_config(path.read_text(), str(path))


def kernel_config(config: Config, name: str, where: Path) -> KernelConfig:
    if name not in config.kernels:
        raise UserError(f"kernel `{name}` is not in {where / CONFIG_PATH} (it lists: {', '.join(config.kernels)})",
                        "Pass one of those names to --kernel, or add an entry for it to the config.")
    return config.kernels[name]


def _as_list(size) -> list | None:
    return None if size is None else size if isinstance(size, list) else [size]


def size_value(size, symbols: dict):
    """A `size:` argument's value in one case: an int, or a list of ints."""
    values = [eval_dim(d, symbols) for d in _as_list(size)]
    return values if isinstance(size, list) else values[0]


def _cases(shapes: list[dict], dtypes: list[str], sizes: dict | None = None) -> list[Case]:
    sizes = sizes or {}
    return [Case(symbols=dict(s), dtype=d, values={n: size_value(z, s) for n, z in sizes.items()})
            for s, d in itertools.product(shapes, dtypes)]


def task_spec(name: str, kernel: KernelConfig, backend: str) -> TaskSpec:
    """The task for one backend. On the interpreter, the smoke shapes are searched and bf16 is left out
    (its arithmetic is wrong there); on a GPU the smoke shapes are held out for the champion's check."""
    sizes = {n: a.size for n, a in kernel.args.items() if a.size is not None}
    if backend == "interpret":
        dtypes = [d for d in kernel.dtypes if d != "bfloat16"] or ["float32"]
        cases, held_out = _cases(kernel.smoke_shapes or kernel.shapes, dtypes, sizes), []
    else:
        cases = _cases(kernel.shapes, kernel.dtypes, sizes)
        held_out = _cases(kernel.smoke_shapes, kernel.dtypes, sizes)
    args = [ArgSpec(name=n, **a.model_dump(exclude={"size"})) for n, a in kernel.args.items()]
    tolerances = {d: Tolerance(t.atol, t.rtol) for d, t in kernel.tolerances.items()}
    return TaskSpec(kernel=name, module=kernel.path, entry=kernel.entry, args=args, cases=cases,
                    held_out=held_out, tolerances=tolerances, written=list(kernel.written),
                    reference=kernel.reference)
