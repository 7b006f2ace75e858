"""Mutation operators: each turns the archive's parents into a new candidate source.

The offline launch-parameter tuner is the first operator and needs no LLM. An LLM rewrite operator
implements the same ``propose`` and plugs into the loop unchanged.
"""
from __future__ import annotations

import random
from typing import Protocol

from .archive import Archive
from .candidate import Candidate
from .launch_params import Knob, find_knobs, render


class Operator(Protocol):
    name: str

    def propose(self, archive: Archive, rng: random.Random) -> Candidate | None:
        """A new, not yet evaluated candidate (its id is assigned by the loop), or None when exhausted."""


class LaunchTuner:
    """Evolves launch parameters (num_warps, num_stages, constexpr tile sizes) at the kernel's launch sites.

    A small genetic search: mutate one or two knobs of a parent chosen by tournament among the elites, or
    recombine two elites knob by knob.
    """

    name = "tuner"

    def __init__(self, baseline_source: str, elites: int = 4, crossover_rate: float = 0.3):
        self.baseline = baseline_source
        self.knobs: list[Knob] = find_knobs(baseline_source)
        self.elites = elites
        self.crossover_rate = crossover_rate

    def _mutate(self, genome: dict, rng: random.Random) -> dict:
        child = dict(genome)
        for knob in rng.sample(self.knobs, k=min(len(self.knobs), rng.choice((1, 1, 2)))):
            current = child.get(knob.key, 0)
            child[knob.key] = rng.choice([i for i in range(len(knob.choices)) if i != current])
        return child

    def propose(self, archive: Archive, rng: random.Random) -> Candidate | None:
        if not self.knobs:
            return None
        parents = archive.elites(self.elites) or archive.candidates[:1]
        if len(parents) >= 2 and rng.random() < self.crossover_rate:
            a, b = rng.sample(parents, 2)
            genome = {k.key: (a if rng.random() < 0.5 else b).genome.get(k.key, 0) for k in self.knobs}
            genome = self._mutate(genome, rng) if rng.random() < 0.5 else genome
            parent = a
        else:
            parent = max(rng.sample(parents, k=min(2, len(parents))),
                         key=lambda c: c.fitness if c.fitness is not None else 0.0)
            genome = self._mutate(parent.genome, rng)
        genome = {k: v for k, v in genome.items() if v}
        return Candidate(id=-1, source=render(self.baseline, self.knobs, genome), operator=self.name,
                         parent_id=parent.id, generation=parent.generation + 1, genome=genome)

    def describe(self, genome: dict) -> list[str]:
        """Human-readable changes, e.g. ``_rms_norm_kernel (line 60): num_warps 4 -> 8``."""
        out = []
        for knob in self.knobs:
            if genome.get(knob.key):
                old = knob.choices[0] if knob.choices[0] is not None else "(default)"
                out.append(f"{knob.kernel} (line {knob.line}): {knob.name} {old} -> {knob.choices[genome[knob.key]]}")
        return out
