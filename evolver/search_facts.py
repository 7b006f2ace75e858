"""What a search did, for `search.json` and the pull-request body: operators, islands, rounds, the models with
their calls, tokens and cost, what each operator produced, what became of torch.compile's seed, and where
the best candidate came from (operator, parent, model, the evaluation that found it, the model's rationale).
"""
from __future__ import annotations

import math
import re

from .archive import Archive
from .candidate import Candidate
from .inductor_seed import SEED, InductorCode

RATIONALE_CHARS = 600
STOPS = {"evaluations": "its evaluation budget was spent", "rounds": "its rounds were done",
         "wall-clock": "its wall-clock budget ran out", "tokens": "its token budget ran out",
         "money": "its money budget ran out", "stagnation": "the best stopped improving",
         "exhausted": "the operators had nothing new to propose",
         "proposals keep failing": "proposals kept failing (no usable code from the models)"}


def rationale(text: str, limit: int = RATIONALE_CHARS) -> str:
    """The model's words before its code (``` or SEARCH/REPLACE), on one line, cut to ``limit``; @-mentions,
    HTML and markdown links are defused so that the pull-request body pings nobody and loads nothing."""
    head = re.split(r"```|<<<<<<< SEARCH", text or "", maxsplit=1)[0]
    head = defuse(" ".join(head.split()))
    return head if len(head) <= limit else head[: limit - 1].rstrip() + "…"


def defuse(text: str) -> str:
    """Text a candidate or a model wrote, made safe for a pull-request body: @-mentions ping nobody, and nothing is
    loaded or linked (no HTML, no markdown images or links)."""
    text = re.sub(r"@(?=\w)", "@\u200b", text or "")
    return text.replace("<", "&lt;").replace("](", "] (")


def describe_change(genome: dict, operator: str, parent_id: int | None) -> str:
    """One line for an LLM candidate: the operator, the model, the parent, a torch.compile seed, attempts."""
    parent = "the baseline" if parent_id in (0, None) else f"candidate {parent_id}"
    seed = ", porting torch.compile's kernel for the reference" if genome.get("seed") == SEED else ""
    kind = {"rewrite": "full rewrite", "diff": "SEARCH/REPLACE edit"}.get(operator, operator)
    return (f"{kind} of {parent} by model {genome['model']}{seed} (accepted after {genome.get('attempts', 1)} "
            f"attempt(s))")


def seed_summary(code: InductorCode | None, archive: Archive) -> dict | None:
    """What became of torch.compile's code: offered or why not, the seeds made from it and how they did."""
    if code is None:
        return None
    seeds = [c for c in archive.candidates if c.genome.get("seed") == SEED]
    return {"offered": code.available, "reason": code.reason, "reference": code.reference, "case": code.case,
            "kernels": [k.name for k in code.kernels], "seeds": len(seeds),
            "seeds_correct": sum(1 for c in seeds if c.correct),
            "best_seed_fitness": max((c.fitness for c in seeds if c.correct and c.fitness), default=None)}


def _by_operator(archive: Archive) -> dict:
    out: dict[str, dict] = {}
    for c in archive.candidates:
        if c.id == 0 or c.evaluation is None:
            continue
        row = out.setdefault(c.operator, {"evaluated": 0, "correct": 0, "best_fitness": None})
        row["evaluated"] += 1
        if c.correct:
            row["correct"] += 1
            if c.fitness is not None and (row["best_fitness"] is None or c.fitness > row["best_fitness"]):
                row["best_fitness"] = c.fitness
    return out


def _origin(c: Candidate | None, order: dict[int, int]) -> dict | None:
    if c is None or c.id == 0:
        return None
    last = c.calls[-1] if c.calls else None
    return {"id": c.id, "operator": c.operator, "parent_id": c.parent_id, "island": c.island,
            "generation": c.generation, "model": c.genome.get("model"), "seed": c.genome.get("seed"),
            "attempts": c.genome.get("attempts"), "fitness": c.fitness, "found_at_evaluation": order.get(c.id),
            "rationale": rationale(last.text) if last is not None else ""}


def search_facts(summary, counters, archive: Archive, operators: list[str], islands: int,
                 inductor: InductorCode | None, order: dict[int, int], sampling: dict) -> dict:
    """``summary``: the loop's SearchSummary; ``counters``: its Counters; ``order``: candidate id -> the
    evaluation (1-based) that measured it."""
    models = summary.usage
    totals = {key: sum(m.get(key, 0) for m in models) for key in
              ("calls", "errors", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost")}
    totals["tokens"] = sum(totals[k] for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                               "cache_write_tokens"))
    best = archive.best_correct()
    return {"stop": summary.stop, "stop_text": STOPS.get(summary.stop, summary.stop), "evaluated": summary.evaluated,
            "duplicates_rejected": summary.duplicates_rejected,
            "rejected_proposals": summary.rejected_proposals, "proposals": counters.proposals,
            "rounds": math.ceil(counters.proposals / max(1, islands)), "round_size": islands,
            "elapsed_s": round(counters.elapsed_s, 1), "models": models, "llm": totals if models else None,
            "sampling": sampling, "operators": operators, "islands": islands, "migrations": archive.migrations,
            "by_operator": _by_operator(archive), "best": best.id if best else None,
            "best_origin": _origin(best, order), "torch_compile": seed_summary(inductor, archive)}
