"""A real ``kill -9`` of a running search process, then resume: nothing evaluated is lost, the search
continues with the same random state, and ends exactly where an uninterrupted run ends."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evolver.store import RunStore

CHILD = Path(__file__).resolve().parent / "search_child.py"
BUDGET = 14


def run(out: Path, budget: int = BUDGET) -> str:
    done = subprocess.run([sys.executable, str(CHILD), str(out), str(budget)], capture_output=True, text=True, check=False,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def evaluated(out: Path) -> list[tuple[int, str, float]]:
    store = RunStore(out / "run.sqlite")
    rows = [(r["id"], r["sha256"], r["fitness"]) for r in store.rows("evaluated")]
    store.close()
    return rows


def test_kill_9_mid_search_then_resume_matches_an_uninterrupted_run(tmp_path):
    straight = tmp_path / "straight"
    straight.mkdir()
    assert f"done {BUDGET} evaluations" in run(straight)

    killed = tmp_path / "killed"
    killed.mkdir()
    proc = subprocess.Popen([sys.executable, str(CHILD), str(killed), str(BUDGET)], stdout=subprocess.PIPE,
                            text=True)
    seen = 0
    deadline = time.monotonic() + 120
    while seen < 5 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen += line.startswith("evaluated")
    os.kill(proc.pid, signal.SIGKILL)  # mid-search: one evaluation is in flight
    proc.wait()
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL and seen == 5
    before = evaluated(killed)
    assert len(before) >= 1 + 5  # the baseline and every evaluation reported before the kill were stored

    output = run(killed)  # resume from the run store
    after = evaluated(killed)
    assert f"done {BUDGET} evaluations" in output
    assert after[: len(before)] == before  # nothing lost or rewritten
    assert len(after) == 1 + BUDGET
    assert [r[1] for r in after] == [r[1] for r in evaluated(straight)]  # same random state, same search


def test_saved_state_restores_the_random_stream_and_the_bandit(tmp_path):
    import json
    import random

    from test_engine_loop import Counter, Device, archive
    from test_engine_providers import PROMPT, FakeProvider

    from evolver.budget import Budget
    from evolver.loop import Search, SearchConfig
    from evolver.providers import Ensemble

    def ensemble():
        cheap, dear = FakeProvider("cheap", 0.01), FakeProvider("dear", 0.1)
        return Ensemble([cheap.spec, dear.spec], providers=[cheap, dear])

    ens = ensemble()
    rng = random.Random(3)
    for _ in range(20):
        name = ens.complete(PROMPT, rng).model
        ens.record_outcome(name, name == "dear")
    first = Search(archive(), [Counter()], [Device()], SearchConfig(Budget(evaluations=4), in_flight=1),
                   random.Random(9), None, ens)
    first.run()
    state = json.loads(json.dumps(first.state()))  # what the store keeps
    second = Search(archive(), [Counter()], [Device()], SearchConfig(Budget(evaluations=4), in_flight=1),
                    random.Random(123), None, ensemble())
    second.restore(state, [])
    assert second.ensemble.state() == first.ensemble.state()
    assert second.n == first.n and second.next_id == first.next_id
    assert [second.rng.random() for _ in range(5)] == [first.rng.random() for _ in range(5)]
    assert [second.ensemble.choose(random.Random(1)) for _ in range(5)] == \
        [first.ensemble.choose(random.Random(1)) for _ in range(5)]
