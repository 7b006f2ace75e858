"""Assembling a search for one job: operators, models, archive, run store and budgets, from plain options.

With no models file the search is the offline launch-parameter tuner alone and needs no network. With one,
the LLM operators (full rewrite of the EVOLVE region, SEARCH/REPLACE diffs) join the tuner, on islands.
"""
from __future__ import annotations

import json
import logging
import random
import secrets
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .archive import Archive
from .budget import PRESETS, Budget
from .candidate import Candidate
from .inductor_seed import InductorCode, capture, from_capture, reference_source
from .llm_operators import LLMOperator
from .loop import Search, SearchConfig, SearchSummary
from .operators import LaunchTuner
from .prompts import PromptBuilder
from .search_facts import describe_change, search_facts
from .providers import Ensemble, load_models
from .store import STORE_FILE, RunStore

log = logging.getLogger("kernelsmith")
LLM_OPERATORS = ("rewrite", "diff")


@dataclass
class EngineOptions:
    budget: int = 24  # evaluations
    models: Path | None = None  # YAML file of models and prices; None: tuner only, no network
    preset: str | None = None  # kernel-smith: 40 rounds, temperature 0.6, top-p 0.95
    operators: list[str] | None = None  # tuner, rewrite, diff; default: tuner (+ rewrite, diff with models)
    islands: int | None = None  # default: 1 for the tuner alone, 4 with LLM operators
    in_flight: int | None = None  # default: 1 for the tuner alone (reproducible), 4 with LLM operators
    rounds: int | None = None
    wall_s: float | None = None
    tokens: int | None = None
    money: float | None = None
    stagnation: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    token_budget: int = 16000  # prompt tokens
    inductor_timeout_s: float = 240.0  # generating torch.compile's code for the reference (GPU only)
    inductor_code: Path | None = None  # a recorded capture (evolver/inductor_capture.py's JSON) to offer instead
    resume_from: Path | None = None  # a run store to continue from
    job: dict = field(default_factory=dict)  # the caller's options, saved for `kernelsmith resume`


class ChangeDescriber:
    """``describe(genome)`` for the report: knob changes for tuner candidates, the model for rewrites."""

    def __init__(self, tuner: LaunchTuner):
        self.tuner, self.knobs = tuner, tuner.knobs

    def describe(self, genome: dict) -> list[str]:
        if genome.get("model"):
            return [describe_change(genome, genome.get("operator", "rewrite"), genome.get("parent"))]
        return self.tuner.describe(genome)


class SearchEvaluate:
    """One device's evaluation for the search: the screening protocol with a fresh seed per candidate, and the next
    candidate loaded and compiled ahead while the current one is judged (``Evaluator.prefetch``)."""

    def __init__(self, evaluator):
        self.evaluator = evaluator

    def __call__(self, cand: Candidate):
        return self.evaluator.evaluate(cand.source, secrets.randbits(62), protocol="search")

    def prefetch(self, cand: Candidate) -> bool:
        return self.evaluator.prefetch(cand.source)

    def cancel_prefetch(self) -> None:
        self.evaluator.cancel_prefetch()


@dataclass
class Engine:
    archive: Archive
    summary: SearchSummary
    describer: ChangeDescriber
    store: RunStore
    facts: dict = field(default_factory=dict)  # search.json: operators, models, tokens, cost, the best's origin


LIMITS = ("rounds", "wall_s", "tokens", "money", "stagnation")


def check_options(models: Path | None, preset: str | None, operators: list[str] | None,
                  limits: dict | None = None) -> None:
    """Refuse bad search options before any work starts (a ValueError that names the fix)."""
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: use {', '.join(PRESETS)}")
    for name in operators or ():
        if name not in ("tuner", *LLM_OPERATORS):
            raise ValueError(f"unknown operator {name!r}: use tuner, rewrite or diff")
        if name in LLM_OPERATORS and models is None:
            raise ValueError(f"operator {name!r} needs models: pass --models FILE (a YAML list of LLMs)")
    if models is not None:
        load_models(models)  # raises ModelsFileError (a ValueError) naming the problem
    for key in limits or {}:
        if key not in LIMITS:
            raise ValueError(f"unknown search limit {key!r}: use {', '.join(LIMITS)}")


def _plain(opts, drop: tuple[str, ...]) -> dict:
    """A dataclass of options as JSON-able values (paths as strings), less the fields in ``drop``."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items() if k not in drop}


def job_options(opts) -> dict:
    """A job's options as JSON-able values, saved in the run store for ``kernelsmith resume``."""
    return _plain(opts, ("resume_from", "overwrite"))


def _islands(opts: EngineOptions) -> int:
    llm = opts.models is not None and any(o in LLM_OPERATORS for o in (opts.operators or LLM_OPERATORS))
    return opts.islands or (4 if llm else 1)


def new_archive(opts: EngineOptions) -> Archive:
    return Archive(islands=_islands(opts))


def _operator_names(opts: EngineOptions, llm: bool) -> list[str]:
    return opts.operators or (["tuner", *LLM_OPERATORS] if llm else ["tuner"])


def _operators(opts: EngineOptions, builder_factory, ensemble, temperature, top_p, baseline: str,
               entry: str) -> list:
    names = _operator_names(opts, ensemble is not None)
    ops = []
    for name in names:
        if name == "tuner":
            ops.append(LaunchTuner(baseline, entry=entry))
        elif name in LLM_OPERATORS:
            if ensemble is None:
                raise ValueError(f"operator {name!r} needs models (--models FILE)")
            ops.append(LLMOperator(name, ensemble, builder_factory(), temperature, top_p))
        else:
            raise ValueError(f"unknown operator {name!r}: use tuner, rewrite or diff")
    return ops


def _inductor_code(evaluator, opts: EngineOptions, store: RunStore, out: Path) -> InductorCode | None:
    """torch.compile's Triton code for the config's reference: from the run store on resume (the prompts stay the
    same), from a recording, or generated now on the GPU. None when the config names no reference."""
    spec = evaluator.spec
    if not getattr(spec, "reference", None):
        return None
    saved = store.get("inductor")
    if saved:
        return InductorCode.from_dict(saved)
    if opts.inductor_code:
        try:
            code = from_capture(json.loads(Path(opts.inductor_code).read_text()), spec.reference)
        except (OSError, ValueError) as exc:
            code = InductorCode(False, f"the recorded code {opts.inductor_code} could not be read: {exc}",
                                spec.reference)
    else:
        bundle = getattr(evaluator, "bundle", None) or Path(out) / "bundle"
        backend = getattr(evaluator.backend, "name", evaluator.backend)
        code = capture(bundle, spec, str(backend), out, timeout=opts.inductor_timeout_s)
    store.put("inductor", code.to_dict())
    return code


def run_search(evaluator, baseline: Candidate, opts: EngineOptions, out: Path, seed: int,
               on_result: Callable[[Candidate], None] = lambda c: None, archive: Archive | None = None,
               evaluate: Callable[[Candidate], object] | list | None = None) -> Engine:
    """Run the search for a job whose baseline is already evaluated; everything is stored in ``out/run.sqlite``."""
    preset = PRESETS.get(opts.preset or "default")
    if preset is None:
        raise ValueError(f"unknown preset {opts.preset!r}: use {', '.join(PRESETS)}")
    temperature = opts.temperature if opts.temperature is not None else preset["temperature"]
    top_p = opts.top_p if opts.top_p is not None else preset["top_p"]
    rounds = opts.rounds if opts.rounds is not None else preset["rounds"]
    ensemble = Ensemble(load_models(opts.models)) if opts.models else None
    islands = _islands(opts)
    in_flight = opts.in_flight or (4 if islands > 1 or ensemble else 1)
    env = baseline.evaluation.env if baseline.evaluation else None
    device, measured = (env.device, env.peak_bandwidth_gbs) if env else (None, None)

    store_path = Path(out) / STORE_FILE
    if opts.resume_from and Path(opts.resume_from).resolve() != store_path.resolve():
        shutil.copyfile(opts.resume_from, store_path)
    store = RunStore(store_path)
    names = _operator_names(opts, ensemble is not None)
    llm = ensemble is not None and bool(set(names) & set(LLM_OPERATORS))
    inductor = _inductor_code(evaluator, opts, store, out) if llm else None  # every LLM prompt; rewrites seed
    bundle = getattr(evaluator, "bundle", None)
    ref_source = reference_source(bundle, getattr(evaluator.spec, "reference", None)) if bundle and ensemble else ""

    def builder():
        return PromptBuilder(evaluator.spec, evaluator.baseline, evaluator.backend, device, opts.token_budget,
                             reference_source=ref_source, inductor=inductor, measured_gbs=measured)

    entry = evaluator.spec.entry
    operators = _operators(opts, builder, ensemble, temperature, top_p, baseline.source, entry)
    tuner = next((op for op in operators if isinstance(op, LaunchTuner)), None) or \
        LaunchTuner(baseline.source, entry=entry)
    tuner.use_spec(evaluator.spec)  # the cases' shapes: a choice of config by size needs them
    archive = archive if archive is not None else Archive(islands=islands)
    archive.add(baseline)
    config = SearchConfig(Budget(evaluations=opts.budget, rounds=rounds, wall_s=opts.wall_s, tokens=opts.tokens,
                                 money=opts.money, stagnation=opts.stagnation),
                          in_flight=in_flight, round_size=islands)
    # One evaluate callable per GPU (the loop runs one evaluation on each at a time); a job has one for now.
    # every candidate is screened under the search protocol; the champion is re-run under the full one (bot/optimize.py)
    evaluate = evaluate or SearchEvaluate(evaluator)
    devices = list(evaluate) if isinstance(evaluate, (list, tuple)) else [evaluate]
    order: dict[int, int] = {}  # candidate id -> the evaluation that measured it

    def counted(cand: Candidate) -> None:
        order.setdefault(cand.id, len(order) + 1)
        on_result(cand)

    search = Search(archive, operators, devices, config, random.Random(seed), store, ensemble, counted)
    state = store.get("state")
    if state:  # resume: the archive, the random and bandit state, the counters; pending candidates re-queued
        if store.get("baseline_sha256") != baseline.sha256:
            raise ValueError("the kernel changed since this run started: its baseline source differs")
        previous = store.load_candidates()
        for cand in previous:
            if cand.id != 0 and cand.evaluation is not None:
                archive.add(cand)
                search.by_id[cand.id] = cand
                counted(cand)
        search.restore(state, [c for c in previous if c.evaluation is None and c.id != 0])
        log.info("resumed: %d evaluated, %d pending", search.n.evaluated, len(search.pending))
    else:
        store.add_candidate(baseline, "evaluated")
        store.put("baseline_sha256", baseline.sha256)
        store.put("options", {**_plain(opts, ("job",)), "seed": seed})
        store.put("job", opts.job)
        store.put("task", evaluator.spec.kernel)
    log.info("search: operators %s, islands %d, in flight %d, budget %s", [op.name for op in operators], islands,
             in_flight, config.budget.to_dict())
    try:
        summary = search.run()
    finally:  # the candidates the search left loading or noted never run beside the champion's verification
        for device in devices:
            getattr(device, "cancel_prefetch", lambda: None)()
    for cand in archive.candidates:  # name the operator and parent in the genome, for the list of changes
        if cand.genome.get("model"):
            cand.genome.setdefault("operator", cand.operator)
            cand.genome.setdefault("parent", cand.parent_id)
    facts = search_facts(summary, search.n, archive, [op.name for op in operators], islands, inductor, order,
                         {"temperature": temperature, "top_p": top_p})
    (Path(out) / "search.json").write_text(json.dumps(facts, indent=2, default=str))
    return Engine(archive, summary, ChangeDescriber(tuner), store, facts)


def load_job(run_dir: Path) -> tuple[dict, Path]:
    """The options of the job in ``run_dir`` and a copy of its run store to resume from (the run folder is
    rewritten by the resumed job)."""
    import tempfile

    path = Path(run_dir) / STORE_FILE
    if not path.is_file():
        raise ValueError(f"{run_dir} holds no {STORE_FILE}: it is not the folder of a kernelsmith run")
    store = RunStore(path)
    job = store.get("job")
    store.close()
    if not job:
        raise ValueError(f"{path} holds no job options (a run started outside `kernelsmith optimize`)")
    copy = Path(tempfile.mkdtemp(prefix="ks-resume-")) / STORE_FILE
    for suffix in ("", "-wal", "-shm"):  # a killed run's last writes may still sit in the write-ahead log
        if Path(str(path) + suffix).exists():
            shutil.copyfile(str(path) + suffix, str(copy) + suffix)
    for key in ("target", "out", "models"):
        if job.get(key):
            job[key] = Path(job[key])
    return job, copy
