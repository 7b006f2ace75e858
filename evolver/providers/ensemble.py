"""Several models in one run, and a bandit that shifts calls toward the models whose children beat their
parents per unit of cost.

Each model is an arm. Its success rate (children that beat their parent, over children evaluated) gets a
Beta posterior; a draw from it divided by the model's mean cost per call (relative to the cheapest) is the
arm's score (Thompson sampling per dollar). Models with no price (a self-hosted server) cost the same.
"""
from __future__ import annotations

import random
import threading
from dataclasses import asdict, dataclass

from .base import Completion, ModelSpec, Prompt, Provider, Usage
from .models_file import make_provider


@dataclass
class Arm:
    calls: int = 0
    cost: float = 0.0
    outcomes: int = 0  # children evaluated
    wins: int = 0  # children that stayed correct and beat their parent


class Ensemble:
    def __init__(self, specs: list[ModelSpec], providers: list[Provider] | None = None, **provider_kw):
        self.specs = {s.name: s for s in specs}
        self.providers = {p.spec.name: p for p in providers} if providers else \
            {s.name: make_provider(s, **provider_kw) for s in specs}
        self.arms = {s.name: Arm() for s in specs}
        self.usage = {s.name: Usage() for s in specs}
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def total(self) -> Usage:
        total = Usage()
        with self._lock:
            for u in self.usage.values():
                total.add(u)
        return total

    def choose(self, rng: random.Random) -> str:
        with self._lock:
            names = self.names
            if len(names) == 1:
                return names[0]
            means = {n: (a.cost / a.calls if a.calls else 0.0) for n, a in self.arms.items()}
            paid = [m for m in means.values() if m > 0]
            floor = min(paid) if paid else 1.0
            scores = {}
            for n in names:
                arm = self.arms[n]
                theta = rng.betavariate(1 + arm.wins, 1 + arm.outcomes - arm.wins)
                scores[n] = theta / max(means[n] / floor, 1.0) if means[n] else theta
            return max(names, key=lambda n: scores[n])

    def complete(self, prompt: Prompt, rng: random.Random, temperature: float | None = None,
                 top_p: float | None = None) -> Completion:
        name = self.choose(rng)
        out = self.providers[name].complete(prompt, temperature, top_p)
        with self._lock:
            self.usage[name].add(out.usage)
            self.arms[name].calls += 1
            self.arms[name].cost += out.usage.cost
        return out

    def record_outcome(self, model: str, won: bool) -> None:
        with self._lock:
            if model in self.arms:
                self.arms[model].outcomes += 1
                self.arms[model].wins += int(won)

    def state(self) -> dict:
        with self._lock:
            return {"arms": {n: asdict(a) for n, a in self.arms.items()},
                    "usage": {n: asdict(u) for n, u in self.usage.items()}}

    def restore(self, state: dict) -> None:
        with self._lock:
            for n, a in state.get("arms", {}).items():
                if n in self.arms:
                    self.arms[n] = Arm(**a)
            for n, u in state.get("usage", {}).items():
                if n in self.usage:
                    self.usage[n] = Usage(**u)

    def report(self) -> list[dict]:
        """Per-model accounting for the report: calls, errors, tokens, cost, wins."""
        with self._lock:
            return [{"model": n, **asdict(self.usage[n]), "wins": self.arms[n].wins,
                     "children_evaluated": self.arms[n].outcomes} for n in self.names]
