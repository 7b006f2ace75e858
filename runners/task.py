"""The task bundle: the contract between extraction (bot) and evaluation (runners).

A bundle is a directory::

    task.yaml          what to call, with which inputs, and how close the answer must be
    baseline/<files>   the kernel module and the local helpers it imports, as in the target repository
    recorded/<sha>.bin integer tensors captured cases replay (raw bytes; runners/recorded.py)

There is no reference function: the baseline is the oracle. A candidate replaces the kernel module
(``TaskSpec.module``) and must compute what the baseline computes, within the dtype's tolerance.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TASK_FILE = "task.yaml"
BASELINE_DIR = "baseline"
REFERENCE_DIR = "reference"  # the torch reference's file, when the config names one


@dataclass
class Tolerance:
    atol: float
    rtol: float


# Written down once, used by every comparison. Integer and bool outputs are always compared exactly.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(atol=1e-5, rtol=1e-5),
    "float16": Tolerance(atol=1e-3, rtol=4e-3),
    "bfloat16": Tolerance(atol=1e-2, rtol=1.6e-2),
    # a float64 output (a sum kept in double) held to float32's 1e-5 let a float32 computation pass (round 8);
    # summation order alone moves a double's sum by far less
    "float64": Tolerance(atol=1e-9, rtol=1e-9),
}


@dataclass
class ArgSpec:
    """One argument of the entry function: a tensor (``shape`` set) or a scalar (``value``)."""

    name: str
    shape: list[Any] | None = None  # ints, symbols or small expressions ("2*I")
    dtype: str | None = None  # None: the case's dtype
    dist: str = "normal"  # normal | uniform
    scale: float = 1.0
    low: float = -1.0
    high: float = 1.0
    value: Any = None
    when: str | None = None  # passed only when this case symbol is true
    range: list[float] | None = None  # a scalar drawn per trial from [low, high] (ints stay ints)
    vary: bool = True  # tensors: vary the scale per trial and add structured rows (see runners/inputs.py)

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None


@dataclass
class Case:
    """One concrete call: symbol values (T=1, H=4096, ...) and the dtype of its floating tensors."""

    symbols: dict[str, Any]
    dtype: str
    origin: str = "config"  # config | captured (recorded from a call the repository's own tests made)
    # Captured layout, as data: argument -> strides (elements) where the call passed a non-contiguous tensor,
    # and argument -> scalar value where the call differed from the config's `value`.
    strides: dict[str, list[int]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    # argument -> the values of an integer or bool tensor the call passed, replayed instead of drawn from
    # low..high (runners/recorded.py: dtype, shape, sha256 and the raw bytes as base64)
    recorded: dict[str, dict] = field(default_factory=dict)
    # other calls the tests made at this case, as ``recorded`` dicts of the same arguments and shapes: later trials
    # and the timing slots rotate through them, so that a kernel that keeps what it derived from one call's
    # routing (token ids, block tables, expert ids) is wrong on the next, as it would be for every real caller
    variants: list[dict[str, dict]] = field(default_factory=list)

    @property
    def id(self) -> str:
        parts = [f"{k}={v}" if not isinstance(v, bool) else (k if v else f"no-{k}") for k, v in self.symbols.items()]
        parts += [f"{k}={v}" for k, v in self.values.items()]
        parts += [f"{k}:strided" for k in self.strides]
        parts += [f"{k}:recorded" for k in self.recorded]
        return f"{','.join(parts)}/{self.dtype}"


@dataclass
class TaskSpec:
    kernel: str
    module: str  # path of the kernel module inside baseline/ (and inside the target repository)
    entry: str  # public wrapper function in that module
    args: list[ArgSpec]
    cases: list[Case]  # searched and timed
    held_out: list[Case] = field(default_factory=list)  # only seen by the champion's verification
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)  # arguments the entry may modify in place
    files: list[str] = field(default_factory=list)  # module + local helpers, relative paths
    target_commit: str | None = None
    python: str | None = None  # interpreter the workers run in (the target's own environment); None: ours
    import_paths: list[str] = field(default_factory=list)  # absolute dirs put first on the workers' sys.path
    env: dict = field(default_factory=dict)  # the config's env:, for the workers (secret-like names dropped)
    # "module.py:function" in baseline/ or "reference.py:function" copied beside it: a plain torch version of
    # the op, timed through torch.compile as a peer column (what a maintainer would try instead).
    reference: str | None = None
    captured: dict = field(default_factory=dict)  # what the capture run recorded: calls, cases kept, skips

    def tolerance(self, dtype: str) -> Tolerance:
        return self.tolerances.get(dtype) or DEFAULT_TOLERANCES.get(dtype) or Tolerance(0.0, 0.0)

    def tolerances_for(self, case_dtype: str):
        """The tolerance of each output by its own dtype (a float32 output of a float16 case, an rstd or a router
        weight, is held to float32's; tests/test_judge_attacks_round7.py), the case's where its dtype has none."""
        def of(dtype) -> Tolerance:
            name = str(dtype).removeprefix("torch.")
            known = name in self.tolerances or name in DEFAULT_TOLERANCES
            return self.tolerance(name if known else case_dtype)
        return of

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TaskSpec:
        data = dict(data)
        data["args"] = [ArgSpec(**a) for a in data["args"]]
        data["cases"] = [Case(**c) for c in data["cases"]]
        data["held_out"] = [Case(**c) for c in data.get("held_out", [])]
        data["tolerances"] = {k: Tolerance(**v) for k, v in data.get("tolerances", {}).items()}
        return cls(**data)


def write_task(bundle: Path, spec: TaskSpec) -> None:
    """task.yaml, and a file under recorded/ per distinct recorded integer tensor of a captured case."""
    import yaml  # here, not at the top: workers import this module in the target's Python, which may lack it

    from .recorded import to_files

    data = spec.to_dict()
    data["cases"], data["held_out"] = to_files(bundle, data["cases"]), to_files(bundle, data["held_out"])
    (bundle / TASK_FILE).write_text(yaml.safe_dump(data, sort_keys=False))


def read_task(bundle: Path) -> TaskSpec:
    import yaml

    from .recorded import from_files

    data = yaml.safe_load((Path(bundle) / TASK_FILE).read_text())
    data["cases"] = from_files(bundle, data["cases"])
    data["held_out"] = from_files(bundle, data.get("held_out", []))
    return TaskSpec.from_dict(data)


def baseline_source(bundle: Path, spec: TaskSpec) -> str:
    return (Path(bundle) / BASELINE_DIR / spec.module).read_text()
