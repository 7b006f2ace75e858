"""LLM mutation operators: a full rewrite of the EVOLVE region, and SEARCH/REPLACE diffs.

Both implement the ``Operator`` protocol of evolver/operators.py. An answer that cannot be used (no code
block, a syntax error, a diff that does not apply, a change outside the region) is fed back to the model
and resampled up to ``max_resamples`` times; a provider failure ends the proposal. Either way the proposal
comes back as a candidate with ``rejected`` set, which costs no evaluation, and its calls are recorded.
"""
from __future__ import annotations

import random
import threading

from runners.syntax import parse

from .archive import Archive
from .candidate import Candidate
from .edits import EditError, apply_diff, apply_rewrite
from .inductor_seed import SEED
from .prompts import PromptBuilder
from .providers.ensemble import Ensemble


class LLMOperator:
    island_aware = True  # it picks the island, the parent and the inspirations itself

    def __init__(self, kind: str, ensemble: Ensemble, builder: PromptBuilder, temperature: float | None = None,
                 top_p: float | None = None, max_resamples: int = 2, inspirations: int = 3):
        if kind not in ("rewrite", "diff"):
            raise ValueError(f"unknown LLM operator {kind!r}")
        self.name = kind
        self.ensemble = ensemble
        self.builder = builder
        self.temperature = temperature
        self.top_p = top_p
        self.max_resamples = max_resamples
        self.k_inspirations = inspirations
        self.seeded: set[int] = set()  # islands whose seed proposal was made
        self._lock = threading.Lock()

    def _apply(self, parent: str, text: str) -> str:
        source = apply_rewrite(parent, text) if self.name == "rewrite" else apply_diff(parent, text)
        try:
            parse(source)
        except SyntaxError as exc:
            raise EditError(f"the code does not parse: line {exc.lineno}: {exc.msg}") from None
        if source.strip() == parent.strip():
            raise EditError("the answer is identical to the parent; propose a change")
        return source

    def _claim_seed(self, archive: Archive, island: int) -> bool:
        """The first rewrite on an island ports torch.compile's code, when there is some (once per island; a
        resumed run knows seeded islands from their members)."""
        if self.name != "rewrite" or self.builder.inductor is None:
            return False
        with self._lock:
            if island in self.seeded or any(c.genome.get("seed") == SEED for c in archive.islands[island].members):
                return False
            self.seeded.add(island)
            return True

    def propose(self, archive: Archive, rng: random.Random) -> Candidate:
        island = rng.randrange(len(archive.islands))
        seeding = self._claim_seed(archive, island)
        if seeding:  # from the baseline; the generated code is in the prompt's static part
            parent, inspirations = archive.candidates[0], []
        else:
            parent = archive.select_parent(rng, island)
            inspirations = archive.inspirations(rng, island, parent, self.k_inspirations)
        failures = archive.recent_failures(island)
        kind = "seed" if seeding else self.name
        calls, retry = [], ""
        child = Candidate(id=-1, source="", operator=self.name, parent_id=parent.id,
                          generation=parent.generation + 1, island=island, calls=calls,
                          inspirations=[c.id for c in inspirations])
        for attempt in range(1 + self.max_resamples):
            prompt = self.builder.build(parent, inspirations, failures, kind, retry)
            completion = self.ensemble.complete(prompt, rng, self.temperature, self.top_p)
            calls.append(completion)
            if completion.error:
                child.rejected = f"model {completion.model} failed: {completion.error}"
                return child
            try:
                child.source = self._apply(parent.source, completion.text)
            except EditError as exc:
                retry = str(exc)
                continue
            child.genome = {"model": completion.model, "attempts": attempt + 1, **({"seed": SEED} if seeding else {})}
            return child
        child.rejected = f"no usable answer after {len(calls)} attempts: {retry}"
        return child
