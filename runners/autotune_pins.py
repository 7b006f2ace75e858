"""The baseline's autotune picks, drawn once per bundle and pinned in every later oracle.

An ``@triton.autotune`` kernel picks its config at the first call of each key by timing them, and where the key
cannot tell sizes apart (the example's LayerNorm: key ``N``, so the first call's row count decides) that pick is a
lottery between configs up to 3.6x apart at other sizes. Each fresh oracle drew again: on the H200 the same
baseline's medians moved 1.6-3.6x between evaluators at bfloat16 (bench/results/evaluator-h200/session14/, part (a)),
so a search, the champion's verification in fresh processes and a resumed job each compared against another
baseline. The first oracle's picks are kept in the bundle (``autotune-pins.json``, the judge's file, beside the task)
and given to every later oracle of that bundle at load (runners/launches.py ``pin``: only where the config list and
the key are the same); the candidates get the oracle's state at every call as before. Keys the file lacks are tuned
as usual and added. The evaluation says where the picks came from."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

FILE = "autotune-pins.json"


def _valid(state) -> dict:
    """What ``launches.autotune_state`` returns, kept only where it has that form: {kernel: {"configs": [str],
    "key": [str], "chosen": [[key list, config str], ...]}}."""
    if not isinstance(state, dict):
        return {}
    out = {}
    for name, entry in state.items():
        if not (isinstance(name, str) and isinstance(entry, dict)):
            continue
        configs, key, chosen = entry.get("configs"), entry.get("key"), entry.get("chosen")
        if not (isinstance(configs, list) and all(isinstance(c, str) for c in configs)
                and isinstance(key, list) and all(isinstance(k, str) for k in key) and isinstance(chosen, list)):
            continue
        picks = [[list(k), c] for k, c in (p for p in chosen if isinstance(p, list) and len(p) == 2)
                 if isinstance(k, list) and isinstance(c, str) and c in configs]
        out[name] = {"configs": list(configs), "key": list(key), "chosen": picks}
    return out


class BaselinePins:
    """The bundle's file of picks: read at start, merged with each evaluation's oracle state, written when it grows."""

    def __init__(self, bundle: Path):
        self.path = Path(bundle) / FILE
        try:
            self.state = _valid(json.loads(self.path.read_text()))
        except (OSError, ValueError):
            self.state = {}
        self.loaded = any(entry["chosen"] for entry in self.state.values())  # an earlier oracle's picks

    def merge(self, oracle_state: dict) -> bool:
        """Add the picks the oracle made at keys the file lacks; a kernel whose configs or key changed starts over.
        Returns whether the file changed (written atomically)."""
        changed = False
        for name, entry in _valid(oracle_state).items():
            kept = self.state.get(name)
            if kept is None or kept["configs"] != entry["configs"] or kept["key"] != entry["key"]:
                if entry["chosen"] or kept is not None:
                    self.state[name] = {**entry, "chosen": list(entry["chosen"])}
                    changed = True
                continue
            known = {json.dumps(k) for k, _ in kept["chosen"]}
            for k, config in entry["chosen"]:
                if json.dumps(k) not in known:
                    kept["chosen"].append([k, config])
                    changed = True
        if changed:
            self._write()
        return changed

    def _write(self) -> None:
        try:
            fd, tmp = tempfile.mkstemp(prefix=".pins-", dir=self.path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump(self.state, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only bundle: the picks hold for this evaluator's oracle only

    def after(self, oracle_state: dict, pinned) -> list[str]:
        """After an evaluation: the oracle's picks merged in; the note for the evaluation where the oracle was loaded
        with an earlier oracle's picks and took them (``pinned``: what ``launches.pin`` said at its load)."""
        self.merge(oracle_state or {})
        took = isinstance(pinned, dict) and "pinned" in pinned.values()
        return [self.describe()] if self.loaded and took else []

    def describe(self) -> str:
        picks = "; ".join(f"{name}: " + ", ".join(f"{tuple(k)} -> {c}" for k, c in entry["chosen"])
                          for name, entry in sorted(self.state.items()) if entry["chosen"])
        return (f"the baseline's autotune picks were drawn by an earlier oracle of this bundle and pinned "
                f"({FILE}): {picks}")
