"""Training data from run stores, in chat-format JSONL, deduplicated and split by task (one file per task).

- SFT: the LLM steps whose child stayed correct and beat its parent (timed fitness above the parent's).
- RL: every LLM answer with its prompt, and reward = child fitness / parent fitness when the child is
  correct and both are timed, else 0 (unusable answers, duplicates and incorrect children score 0).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .store import STORE_FILE, RunStore


def _messages(call: dict) -> list[dict]:
    return [{"role": "system", "content": call["system"] or ""},
            {"role": "user", "content": (call["static"] or "") + "\n\n" + (call["dynamic"] or "")}]


def _task(store: RunStore) -> str:
    job = store.get("job") or {}
    return str(job.get("kernel") or store.get("task") or "task")


def records(run_dir: Path, fmt: str) -> tuple[str, list[dict]]:
    store = RunStore(Path(run_dir) / STORE_FILE)
    try:
        task = _task(store)
        rows = {r["id"]: r for r in store.rows()}
        calls = store.call_rows()
    finally:
        store.close()
    out = []
    last_call = {}
    for call in calls:  # the answer that became the candidate is the candidate's last call
        last_call[call["candidate_id"]] = call["id"]
    for call in calls:
        if call["error"] or not call["response"]:
            continue
        child = rows.get(call["candidate_id"])
        final = child is not None and last_call[call["candidate_id"]] == call["id"]
        parent = rows.get(child["parent_id"]) if child and child["parent_id"] is not None else None
        reward = 0.0
        # Fitness is relative to the baseline (the oracle), so the baseline's own is 1 by definition.
        parent_fitness = 1.0 if parent is not None and parent["parent_id"] is None else \
            (parent["fitness"] if parent is not None else None)
        if final and child["status"] == "evaluated" and child["correct"] and child["fitness"] and parent_fitness:
            reward = child["fitness"] / parent_fitness
        meta = {"task": task, "run": str(run_dir), "candidate": call["candidate_id"], "model": call["model"],
                "prompt": call["kind"],  # rewrite, diff, or seed (porting torch.compile's code)
                "operator": child["operator"] if child else None, "parent": child["parent_id"] if child else None}
        if fmt == "sft":
            if reward > 1.0:
                out.append({"messages": [*_messages(call), {"role": "assistant", "content": call["response"]}],
                            "metadata": {**meta, "speedup_over_parent": reward}})
        elif fmt == "rl":
            out.append({"prompt": _messages(call), "response": call["response"], "reward": reward,
                        "metadata": {**meta, "correct": bool(child and child["correct"]),
                                     "stage": json.loads(child["evaluation"])["stage"]
                                     if child and child["evaluation"] else (child or {}).get("status")}})
        else:
            raise ValueError(f"unknown format {fmt!r}: use sft or rl")
    return task, out


def _key(rec: dict) -> str:
    body = rec.get("messages") or [*rec["prompt"], {"role": "assistant", "content": rec["response"]}]
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def export(run_dirs: list[Path], fmt: str, out: Path) -> dict[str, int]:
    """Write ``<out>/<task>.<fmt>.jsonl`` for every task; returns records per task."""
    if fmt not in ("sft", "rl"):
        raise ValueError(f"unknown format {fmt!r}: use sft or rl")
    by_task: dict[str, dict[str, dict]] = {}
    for run_dir in run_dirs:
        if not (Path(run_dir) / STORE_FILE).is_file():
            raise ValueError(f"{run_dir} holds no {STORE_FILE}")
        task, recs = records(run_dir, fmt)
        bucket = by_task.setdefault(task, {})
        for rec in recs:
            bucket.setdefault(_key(rec), rec)
    out.mkdir(parents=True, exist_ok=True)
    for task, recs in by_task.items():
        with open(out / f"{task}.{fmt}.jsonl", "w") as f:
            for rec in recs.values():
                f.write(json.dumps(rec) + "\n")
    return {task: len(recs) for task, recs in by_task.items()}
