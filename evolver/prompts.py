"""Prompts from Jinja2 templates (templates/prompts/): the task and hardware facts (static, cached by the
provider), then the parent with its per-case table, trimmed feedback of recent failures and inspirations,
bounded by a token budget: inspirations go first, then failures, then the feedback is cut shorter.
"""
from __future__ import annotations

from pathlib import Path

import jinja2

from runners.task import TaskSpec

from .candidate import Candidate
from .edits import START
from .inductor_seed import HELPERS, InductorCode
from .providers.base import Prompt

TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "prompts"
CHARS_PER_TOKEN = 4  # a conservative estimate for code; only the budget uses it

# name fragment -> (SMs, L2 MiB, DRAM GB/s, warp width); looked up in the device name the evaluator reports.
HARDWARE = {
    "H200": (132, 50, 4800, 32), "H100": (132, 50, 3350, 32), "H20": (78, 60, 4000, 32),
    "A100": (108, 40, 2039, 32), "L40": (142, 96, 864, 32), "MetaX": (104, 32, 1800, 64),
    "C500": (104, 32, 1800, 64), "MI300": (304, 256, 5300, 64),
}


def estimate_tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN + 1


def hardware_facts(device: str | None, backend, warp_size: int | None = None,
                   measured_gbs: float | None = None) -> str:
    """Device, SMs, L2, bandwidth and warp width. ``backend`` is a name or a runners backend (its
    ``warp_size`` wins over the table: 32 on NVIDIA, 64 on MetaX); ``measured_gbs`` is the copy bandwidth the
    evaluator measured on this device."""
    facts = _hardware(device, backend, warp_size)
    if measured_gbs and getattr(backend, "name", backend) != "interpret":
        facts += f" Copy bandwidth measured on this device: {measured_gbs:.0f} GB/s (bytes read + written)."
    return facts


def _hardware(device: str | None, backend, warp_size: int | None) -> str:
    name = getattr(backend, "name", backend)
    warp_size = warp_size or getattr(backend, "warp_size", None)
    if name == "interpret" or not device:
        return ("Triton's CPU interpreter (correctness only; nothing is timed). Write for an NVIDIA GPU: a warp is "
                "32 threads.")
    for key, (sms, l2, bw, warp) in HARDWARE.items():
        if key.lower() in device.lower():
            warp = warp_size or warp
            return (f"{device}: {sms} SMs, {l2} MiB L2, about {bw} GB/s DRAM bandwidth, warp width {warp} "
                    f"threads{' (64-wide warps: num_warps means twice the threads of NVIDIA)' if warp == 64 else ''}.")
    warp = warp_size or (64 if name == "maca" or "metax" in device.lower() else 32)
    return f"{device}: warp width {warp} threads."


def _trim(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit // 3
    return text[:head] + "\n[...]\n" + text[-(limit - head):]


def _fmt(v: float | None, spec: str) -> str:
    return format(v, spec) if v is not None else "–"


def _status(c: Candidate) -> str:
    if not c.correct:
        return "incorrect"
    return f"{c.fitness:.3f}x" if c.fitness is not None else "correct, not timed"


class PromptBuilder:
    def __init__(self, spec: TaskSpec, baseline: str, backend, device: str | None = None,
                 token_budget: int = 16000, feedback_chars: int = 1200, reference_source: str = "",
                 inductor: InductorCode | None = None, inductor_chars: int = 6000, measured_gbs: float | None = None):
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True,
                                 undefined=jinja2.StrictUndefined)
        self.step = env.get_template("step.j2")
        self.system = env.get_template("system.j2").render().strip()
        self.has_region = START in baseline
        self.entry = spec.entry
        self.static = env.get_template("task.j2").render(
            spec=spec, has_region=self.has_region, baseline=baseline.rstrip(),
            tolerances={d: spec.tolerance(d) for d in sorted({c.dtype for c in spec.cases})},
            written=", ".join(spec.written), hardware=hardware_facts(device, backend, measured_gbs=measured_gbs),
            reference=getattr(spec, "reference", None) or "", reference_source=reference_source.rstrip(),
            inductor=inductor, inductor_text=inductor.prompt_text(inductor_chars) if inductor and inductor.available
            else "", helpers="; ".join(f"`{k.rstrip('.')}` → {HELPERS[k]}" for k in (
                inductor.helpers_used() if inductor and inductor.available else ())))
        self.inductor = inductor if inductor is not None and inductor.available else None
        self.token_budget = token_budget
        self.feedback_chars = feedback_chars

    @staticmethod
    def rows(c: Candidate) -> list[dict]:
        ev, out = c.evaluation, []
        if not ev or not ev.timed:
            return out
        peak = ev.env.peak_bandwidth_gbs if ev.env else None
        for r in ev.cases:
            pct = 100 * r.bandwidth_gbs / peak if (r.bandwidth_gbs and peak) else None
            out.append({"case": r.case, "base": _fmt(r.baseline_us, ".2f"), "cand": _fmt(r.candidate_us, ".2f"),
                        "speedup": _fmt(r.speedup, ".3f") + "x" if r.speedup else "–", "peak": _fmt(pct, ".0f")})
        return out

    def failure(self, c: Candidate, limit: int) -> dict:
        ev = c.evaluation
        text = ev.error or ev.feedback
        worst = max((r for r in ev.cases if not r.correct), key=lambda r: r.err_ratio, default=None)
        if worst is not None:
            text += (f" (largest mismatch on {worst.case}: max |err| {worst.max_abs_err:.3g}, "
                     f"{worst.err_ratio:.3g}x the tolerance; {worst.message})")
        return {"id": c.id, "stage": ev.stage, "text": _trim(text, limit)}

    def build(self, parent: Candidate, inspirations: list[Candidate], failures: list[Candidate],
              kind: str = "rewrite", retry: str = "") -> Prompt:
        insp = list(inspirations)
        fails = [f for f in failures if f.evaluation]
        limit = self.feedback_chars
        budget = self.token_budget - estimate_tokens(self.system + self.static)
        while True:
            dynamic = self.step.render(
                parent=parent, parent_status=_status(parent), rows=self.rows(parent),
                failures=[self.failure(f, limit) for f in fails],
                inspirations=[{"id": c.id, "status": _status(c), "source": c.source} for c in insp],
                kind=kind, has_region=self.has_region, retry=_trim(retry, 2000) if retry else "",
                entry=self.entry)
            if estimate_tokens(dynamic) <= budget:
                break
            if insp:
                insp.pop()
            elif limit > 200 and fails:
                limit //= 2
            elif fails:
                fails.pop(0)
            else:
                break  # the parent alone is over budget: send it anyway, a model needs it
        return Prompt(system=self.system, static=self.static, dynamic=dynamic, kind=kind)


__all__ = ["PromptBuilder", "estimate_tokens", "hardware_facts"]
