"""Typed results of an evaluation (plain dataclasses: they cross a process boundary as JSON)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field


@dataclass
class Environment:
    backend: str
    device: str
    driver: str | None = None
    cuda: str | None = None
    torch: str = ""
    triton: str = ""
    python: str = ""
    peak_bandwidth_gbs: float | None = None  # measured device-to-device copy, bytes read + written
    warp_size: int | None = None
    isolation: str = ""  # whether candidates ran as another user than the judge and the oracle


@dataclass
class CaseResult:
    case: str
    correct: bool = False
    max_abs_err: float = 0.0
    err_ratio: float = 0.0  # worst |err| / (atol + rtol*|ref|) over trials: <= 1 passes
    trials: int = 0
    message: str = ""
    baseline_us: float | None = None
    candidate_us: float | None = None
    baseline_spread: float | None = None  # interquartile range / median
    candidate_spread: float | None = None
    baseline_host_us: float | None = None  # Python-side launch cost, never part of the speedup
    candidate_host_us: float | None = None
    timing_method: str | None = None  # cuda-graph | cuda-events
    bytes_moved: int | None = None
    bandwidth_gbs: float | None = None
    samples: int | None = None  # interleaved samples per side
    slots: int | None = None  # rotating input/output sets in the timed graph
    judge_us: float | None = None  # the candidate's time per call by the judge's own clock (corroboration)
    judge_ratio: float | None = None  # judge_us / candidate_us: about 1 when the claimed time is honest
    claimed_us: float | None = None  # set when the claim beat the judge's clock: candidate_us is then capped
    window_ms: list[float] | None = None  # the judge's pass wall times: the baseline's rounds, then the candidate's
    window_parts: list[dict] | None = None  # the oracle's ms per round: pass, fill, commit, lead (its events); host,
    # queue, replay (its host's time for the request, to queue the fill, to launch the pass's graphs)
    window_slots: int | None = None  # the calls (distinct slots) in each pass of the judge's window
    window_claimed_parts: list[dict] | None = None  # the candidate's own account of its rounds (never trusted)
    launched: list[str] = field(default_factory=list)  # Triton kernels the candidate launched (module:name)
    own_kernel_share: float | None = None  # share of device time in the candidate's own Triton kernels
    reference_us: float | None = None  # torch.compile of the config's torch reference, same protocol
    autotune: dict = field(default_factory=dict)  # autotuned kernel -> pinned | own configs | own key
    output_scale: float | None = None  # median |value| of the oracle's floating outputs (trial 0): what atol is
    # read against (an atol above it accepts outputs that are entirely wrong)

    def add_message(self, text: str) -> None:
        self.message = f"{self.message} {text}" if self.message else text

    @property
    def speedup(self) -> float | None:
        if self.baseline_us and self.candidate_us:
            return self.baseline_us / self.candidate_us
        return None


@dataclass
class Evaluation:
    # Where it stopped: policy, compile, correctness, kernel, timing, plausibility, done; or baseline (the
    # oracle itself failed), timeout, crashed.
    stage: str = "policy"
    ok: bool = False  # passed every stage that was asked for
    timed: bool = False  # device times were measured (never on the interpreter)
    cases: list[CaseResult] = field(default_factory=list)
    error: str = ""  # what stopped it, for the log and the next prompt
    duration_s: float = 0.0
    env: Environment | None = None
    notes: list[str] = field(default_factory=list)
    phases: dict = field(default_factory=dict)  # seconds: worker, load, correctness, timing, torch.compile,
    # profile, recheck
    protocol: str = "verify"  # verify: the full protocol; search: the screening one (runners/protocol.py)

    @property
    def fitness(self) -> float | None:
        """Geometric mean of per-case speedups; 0 when incorrect; None when nothing was timed."""
        if not self.ok:
            return 0.0
        speedups = [c.speedup for c in self.cases]
        if not self.timed or not speedups or any(s is None for s in speedups):
            return None
        return math.exp(sum(math.log(s) for s in speedups) / len(speedups))

    @property
    def feedback(self) -> str:
        """Short structured feedback: where it stopped and why, or the per-case speedups."""
        if not self.ok:
            return f"{self.stage} failed: {self.error}"
        if not self.timed:
            return f"correct on {len(self.cases)} cases (not timed)"
        return "; ".join(f"{c.case}: {c.speedup:.3f}x" for c in self.cases)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["fitness"] = self.fitness
        for c, cd in zip(self.cases, d["cases"]):
            cd["speedup"] = c.speedup
        return d

    @classmethod
    def from_dict(cls, data: dict) -> Evaluation:
        data = {k: v for k, v in data.items() if k != "fitness"}
        data["cases"] = [CaseResult(**{k: v for k, v in c.items() if k != "speedup"}) for c in data.get("cases", [])]
        data["env"] = Environment(**data["env"]) if data.get("env") else None
        return cls(**data)
