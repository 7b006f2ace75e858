"""The options of one optimisation job, in a module that imports nothing heavy: the service's job worker
builds them before it knows which pipeline runs (bot.jobs.runner.options_for), and importing bot.optimize
for them would load torch and the judge (~3 s) in a worker whose pipeline may never use them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class OptimizeOptions:
    target: Path
    kernel: str
    out: Path
    budget: int = 24
    backend: str = "auto"  # auto | triton | interpret
    apply: bool = False
    seed: int | None = None  # the search's RNG; correctness inputs always use fresh secret seeds
    min_speedup: float = 1.03  # a champion must beat the baseline by this factor, re-timed
    trials: int = 3
    timeout: float = 300.0
    overwrite: bool = False
    models: Path | None = None  # YAML file of LLMs and prices; None: the launch-parameter tuner alone
    preset: str | None = None  # kernel-smith: 40 rounds, temperature 0.6, top-p 0.95
    operators: list[str] | None = None  # tuner, rewrite, diff
    resume_from: Path | None = None  # the run store of an interrupted run (kernelsmith resume)
    limits: dict | None = None  # more budgets of the search: rounds, wall_s, tokens, money, stagnation
