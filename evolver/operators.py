"""Mutation operators: each turns the archive's parents into a new candidate source.

The offline launch-parameter tuner is the first operator and needs no LLM. An LLM rewrite operator
implements the same ``propose`` and plugs into the loop unchanged.
"""
from __future__ import annotations

import random
import threading
from typing import Protocol

from runners.syntax import parse

from .archive import Archive
from .autotune_choice import Size, choice_key, compose, grid_size, is_choice_key, render_choice, size_param
from .autotune_choice import describe as describe_choice
from .candidate import Candidate
from .kernel_sizes import case_sizes
from .launch_params import Knob, autotuned_kernels, find_knobs, render


class Operator(Protocol):
    name: str

    def propose(self, archive: Archive, rng: random.Random) -> Candidate | None:
        """A new, not yet evaluated candidate (its id is assigned by the loop), or None when exhausted."""


def sweep_order(knob: Knob) -> list[int]:
    """The choices of an autotune knob in the order to try them one at a time: pinned configs farthest-first
    (each next pin is the one least like those already tried, values compared by their rank among the configs),
    so that a small budget still times the extremes (one row per program and many, few warps and many); then the
    other choices in their order."""
    pins = {i: dict(p.split("=", 1) for p in knob.labels[i][4:].split(", ") if "=" in p)
            for i in range(1, len(knob.choices)) if knob.labels and knob.labels[i].startswith("pin ")}
    rank: dict[str, dict[str, float]] = {}
    for name in {n for meta in pins.values() for n in meta}:
        values = list(dict.fromkeys(meta[name] for meta in pins.values() if name in meta))
        try:
            values.sort(key=float)
        except ValueError:
            pass  # not numbers: their order of appearance
        rank[name] = {v: i / max(1, len(values) - 1) for i, v in enumerate(values)}

    def distance(a: int, b: int) -> float:
        return sum(abs(rank[n][pins[a][n]] - rank[n][pins[b][n]]) if n in pins[a] and n in pins[b] else 1.0
                   for n in set(pins[a]) | set(pins[b]))

    order = sorted(pins)[:1]
    while len(order) < len(pins):
        order.append(max((i for i in sorted(pins) if i not in order),
                         key=lambda i: (min(distance(i, j) for j in order), -i)))
    return order + [i for i in range(1, len(knob.choices)) if i not in pins]


class LaunchTuner:
    """Evolves launch parameters at the launch sites the entry reaches: num_warps, num_stages and constexpr
    tile sizes of plain launches, and the configs and key of ``@triton.autotune`` kernels.

    Autotune knobs are first tried one choice at a time (each key, then each config pinned or subset), so
    that every case gets a time for every config; then a small genetic search: mutate one or two knobs of a parent
    chosen by tournament among the elites, or recombine two elites knob by knob. As soon as two pinned configs of
    an autotuned kernel were timed and different ones were fastest at different sizes, the next candidate is the
    choice of config by size (evolver/autotune_choice.py; needs the task's cases: ``spec``), again whenever more
    pins change it.
    """

    name = "tuner"

    def __init__(self, baseline_source: str, elites: int = 4, crossover_rate: float = 0.3,
                 entry: str | None = None, spec=None):
        self.baseline = baseline_source
        self.entry = entry
        self.spec = spec  # runners.task.TaskSpec: the cases' shapes, for a choice of config by size
        self._sizes: dict[tuple[str, str], dict] = {}
        self._choices: set[str] = set()  # choice-by-size sources already proposed
        self._tuned: dict | None = None  # the autotuned kernels the entry launches, read once
        self.knobs: list[Knob] = find_knobs(baseline_source, entry)
        self.elites = elites
        self.crossover_rate = crossover_rate
        # the key choices first (few, and the likeliest win when the key misses a size; bucketed keys before
        # exact ones), then each config pinned, the most different configs first, then the subsets
        tuned = sorted((k for k in self.knobs if k.kind == "autotune"), key=lambda k: k.name != "key")
        self._sweep = [{k.key: i} for k in tuned for i in sweep_order(k)]
        self._lock = threading.Lock()

    def _mutate(self, genome: dict, rng: random.Random) -> dict:
        child = dict(genome)
        for knob in rng.sample(self.knobs, k=min(len(self.knobs), rng.choice((1, 1, 2)))):
            current = child.get(knob.key, 0)
            child[knob.key] = rng.choice([i for i in range(len(knob.choices)) if i != current])
        return child

    def use_spec(self, spec) -> None:
        """The task (its cases' shapes), once known: a choice of config by size needs it."""
        self.spec = spec

    def _candidate(self, genome: dict, parent: Candidate) -> Candidate:
        genome = {k: v for k, v in genome.items() if v and not is_choice_key(k)}  # a choice is not mutated
        return Candidate(id=-1, source=render(self.baseline, self.knobs, genome, self.entry), operator=self.name,
                         parent_id=parent.id, generation=parent.generation + 1, genome=genome)

    def propose(self, archive: Archive, rng: random.Random) -> Candidate | None:
        if not self.knobs:
            return None
        baseline = archive.candidates[0] if archive.candidates else Candidate(id=0, source=self.baseline,
                                                                             operator="baseline")
        with self._lock:
            choice = self._choice(archive, baseline)
            if choice is not None:
                return choice
            while self._sweep:
                candidate = self._candidate(self._sweep.pop(0), baseline)
                if not archive.seen(candidate.source):
                    return candidate
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
        return self._candidate(genome, parent)

    def _autotuned(self) -> dict:
        if self._tuned is None:
            tree = parse(self.baseline)
            self._tuned = {t.kernel: t for t in autotuned_kernels(tree, self.baseline, self.entry)} \
                if any(k.kind == "autotune" for k in self.knobs) else {}
        return self._tuned

    def _knob(self, kernel: str, name: str) -> Knob | None:
        return next((k for k in self.knobs if k.kind == "autotune" and k.kernel == kernel and k.name == name), None)

    def _choice(self, archive: Archive, baseline: Candidate) -> Candidate | None:
        """The choice of config by size from the pins timed so far, if it is new (evolver/autotune_choice.py)."""
        if getattr(self.spec, "cases", None) is None or self.entry is None:
            return None
        for kernel, tuned in self._autotuned().items():
            configs, key = self._knob(kernel, "configs"), self._knob(kernel, "key")
            size = self._size(tuned, key) if configs is not None else None
            if size is None:
                continue
            sizes = self._case_sizes(tuned, size)
            plan = compose(tuned, configs, key, archive.candidates, sizes, size)
            if plan is None:
                continue
            source = render_choice(self.baseline, self.knobs, self.entry, plan, tuned, sizes)
            if source is None or source in self._choices or archive.seen(source):
                continue
            self._choices.add(source)
            return Candidate(id=-1, source=source, operator=self.name, parent_id=baseline.id,
                             generation=baseline.generation + 1, genome=plan.genome)
        return None

    def _size(self, tuned, key: Knob | None) -> Size | None:
        """The size the key misses: the scalar of the first re-keying, or else a size only the grid uses."""
        found = size_param(key) if key is not None else None
        if found is not None:
            return Size(found[0], found[1])
        grid = grid_size(parse(self.baseline), self.entry, tuned)
        return Size(grid.id, grid=grid) if grid is not None else None

    def _case_sizes(self, tuned, size: Size) -> dict:
        if (tuned.kernel, size.name) not in self._sizes:
            self._sizes[tuned.kernel, size.name] = case_sizes(parse(self.baseline), self.entry, tuned.fn, tuned.sites,
                                                              size.name, self.spec, size.grid)
        return self._sizes[tuned.kernel, size.name]

    def describe(self, genome: dict) -> list[str]:
        """Human-readable changes, e.g. ``_rms_norm_kernel (line 60): num_warps 4 -> 8``."""
        out = []
        for key, value in genome.items():
            configs = self._knob(key.split("@", 1)[0], "configs") if is_choice_key(key) else None
            if configs is not None:
                text = describe_choice(value, configs)
                out.append(f"{configs.kernel} (line {configs.line}): autotune {text}")
        for knob in self.knobs:
            if genome.get(knob.key):
                name = f"autotune {knob.name}:" if knob.kind == "autotune" else knob.name
                out.append(f"{knob.kernel} (line {knob.line}): {name} {knob.label(0)} -> "
                           f"{knob.label(genome[knob.key])}")
        return out

    def autotune_findings(self, archive: Archive, margin: float = 1.05) -> list[dict]:
        """Per autotuned kernel, the fastest pinned config on each case, as data the report can show.

        ``differs`` is true when cases want different configs; ``key_blind`` when, in addition, the autotuned
        baseline is slower than the best pinned config by ``margin`` or more on some case: the autotuner made
        one choice for shapes that need different ones, so its key cannot tell them apart."""
        findings = []
        for knob in (k for k in self.knobs if k.kind == "autotune" and k.name == "configs"):
            best: dict[str, tuple[float, str, float]] = {}  # case -> (candidate µs, label, speedup)
            tried: set[str] = set()  # the pinned configs timed
            for cand in archive.candidates:
                choice = cand.genome.get(knob.key, 0)
                if set(cand.genome) != {knob.key} or not knob.labels[choice].startswith("pin ") \
                        or not (cand.evaluation and cand.evaluation.ok and cand.evaluation.timed):
                    continue
                tried.add(knob.labels[choice][4:])
                for case in cand.evaluation.cases:
                    if case.candidate_us and (case.case not in best or case.candidate_us < best[case.case][0]):
                        best[case.case] = (case.candidate_us, knob.labels[choice][4:], case.speedup or 0.0)
            if not best:
                continue
            configs = {label for _, label, _ in best.values()}
            gains = {c: round(s, 3) for c, (_, _, s) in best.items()}
            differs = len(configs) > 1
            key_blind = differs and max(gains.values()) >= margin
            key = next((k for k in self.knobs if k.kernel == knob.kernel and k.name == "key"), None)
            written = key.label(0) if key else self._written_key(knob.kernel)
            keys_tried = self._keys_tried(archive, key) if key else {}
            note = ""
            if key_blind:
                note = (f"{knob.kernel}: the best config differs across shapes and the autotuned baseline is up to "
                        f"{max(gains.values()):.2f}x slower than the best pinned config on some of them: its "
                        f"key {written} cannot tell these shapes apart")
                better = {k: v for k, v in keys_tried.items() if v >= margin}
                if better:
                    top = max(better, key=better.get)
                    note += f"; re-keyed as {top} it measured {better[top]:.2f}x (geometric mean)"
                elif key and len(key.labels) > 1:
                    untried = [lab for lab in key.labels[1:] if lab not in keys_tried]
                    note += (f"; keys to try: {', '.join(untried)}" if untried else
                             "; no run-time argument in the key helped: choose the config by shape in the launcher "
                             "(" + ", ".join(f"{c}: {lab}" for c, (_, lab, _) in sorted(best.items())) + ")")
                else:
                    note += ("; no run-time argument is free to add to the key: choose the config by shape in the "
                             "launcher (" + ", ".join(f"{c}: {lab}" for c, (_, lab, _) in sorted(best.items())) + ")")
            elif differs:
                note = f"{knob.kernel}: the best config differs across shapes, and the autotuner already finds it"
            choice = self._choice_tried(archive, knob)
            if choice and note:
                note += (f"; with the {choice['rule']} written in the source it measured {choice['fitness']:.2f}x "
                         f"(geometric mean)")
            findings.append({"kernel": knob.kernel, "line": knob.line, "key": written, "choice": choice,
                             "best_config": {c: label for c, (_, label, _) in best.items()},
                             "pinned_speedup": gains, "differs": differs, "key_blind": key_blind,
                             "keys_tried": keys_tried, "pinned_tried": len(tried), "note": note})
        return findings

    def _written_key(self, kernel: str) -> str:
        """The autotune key as the kernel's decorator writes it (also when no argument is free to add to it)."""
        tree = parse(self.baseline)
        found = next((t for t in autotuned_kernels(tree, self.baseline, self.entry) if t.kernel == kernel), None)
        if found is None or found.key_node is None:
            return "(built at run time)"
        return f"{found.key}"

    def _choice_tried(self, archive: Archive, configs: Knob) -> dict | None:
        """The best timed choice of config by size of this kernel: its rule, geometric mean and per-case speedups."""
        key = choice_key(configs.kernel)
        tried = [c for c in archive.candidates if set(c.genome) == {key} and c.evaluation and c.evaluation.ok
                 and c.evaluation.timed and c.evaluation.fitness is not None]
        if not tried:
            return None
        best = max(tried, key=lambda c: c.evaluation.fitness)
        return {"rule": describe_choice(best.genome[key], configs),
                "fitness": round(best.evaluation.fitness, 3), "candidate": best.id,
                "speedup": {c.case: round(c.speedup, 3) for c in best.evaluation.cases if c.speedup}}

    @staticmethod
    def _keys_tried(archive: Archive, key: Knob) -> dict[str, float]:
        """Geometric-mean speedup of each re-keyed candidate that changed nothing but the key."""
        tried: dict[str, float] = {}
        for cand in archive.candidates:
            choice = cand.genome.get(key.key, 0)
            if choice and set(cand.genome) == {key.key} and cand.evaluation and cand.evaluation.ok \
                    and cand.evaluation.timed and cand.evaluation.fitness is not None:
                tried[key.labels[choice]] = round(max(tried.get(key.labels[choice], 0.0), cand.evaluation.fitness), 3)
        return tried
