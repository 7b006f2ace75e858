"""Archive invariants: the best is never lost, islands stay apart until migration, MAP-Elites cells,
selection with a penalty for many children, inspirations, and duplicates refused by normalised AST."""
import random

from engine_fixtures import EXAMPLE

from evolver.archive import Archive, rank
from evolver.candidate import Candidate
from evolver.descriptors import code_features
from runners.results import CaseResult, Evaluation

SOFTMAX = (EXAMPLE / "tinyserve/kernels/softmax.py").read_text()


def timed(speed: float | None, ok: bool = True) -> Evaluation:
    if not ok:
        return Evaluation(stage="correctness", error="mismatch")
    if speed is None:
        return Evaluation(stage="done", ok=True, cases=[CaseResult("c", correct=True)])
    return Evaluation(stage="done", ok=True, timed=True,
                      cases=[CaseResult("c", correct=True, baseline_us=10.0, candidate_us=10.0 / speed)])


def variant(i: int, warps: int = 4) -> str:
    return SOFTMAX.replace("num_stages=1,", f"num_stages=1,  # v{i}").replace(
        "num_warps=num_warps,", f"num_warps={warps},") + f"\nVARIANT = {i}\n"


def cand(i, speed, island=0, parent=0, warps=4, ok=True):
    c = Candidate(i, variant(i, warps), "rewrite", parent_id=parent, island=island)
    c.evaluation = timed(speed, ok)
    return c


def with_baseline(islands=2, interval=0):
    a = Archive(islands=islands, migration_interval=interval)
    base = Candidate(0, SOFTMAX, "baseline")
    base.evaluation = timed(1.0)
    a.add(base)
    return a


def test_best_is_never_lost_whatever_comes_after():
    a = with_baseline(islands=3, interval=4)
    rng = random.Random(0)
    best_so_far = 1.0
    for i in range(1, 200):
        speed = rng.uniform(0.5, 2.0)
        ok = rng.random() > 0.3
        a.add(cand(i, speed, island=rng.randrange(3), warps=rng.choice([2, 4, 8]), ok=ok))
        if ok:
            best_so_far = max(best_so_far, speed)
        assert abs(a.best().fitness - best_so_far) < 1e-12
    # the grids hold at most one elite per cell, but the global best is still there
    cells = sum(len(i.cells) for i in a.islands)
    assert cells < 200 and a.best() in a.candidates


def test_islands_are_isolated_until_ring_migration():
    a = with_baseline(islands=3, interval=0)
    star = cand(1, 3.0, island=0, warps=8)
    a.add(star)
    assert star in a.islands[0].cells.values()
    assert star not in a.islands[1].cells.values() and star not in a.islands[2].cells.values()
    assert all(a.select_parent(random.Random(s), 1).id == 0 for s in range(20))  # island 1 never sees it
    a.migrate()
    assert star in a.islands[1].cells.values()  # ring: 0 -> 1
    assert star not in a.islands[2].cells.values()
    a.migrate()
    assert star in a.islands[2].cells.values()  # and on, 1 -> 2


def test_migration_happens_on_its_own_every_interval():
    a = with_baseline(islands=2, interval=5)
    for i in range(1, 5):
        a.add(cand(i, 1.0 + i / 10, island=0, warps=8))
    assert a.migrations == 1 and a.islands[0].best() in a.islands[1].cells.values()


def test_map_elites_keeps_one_elite_per_design():
    a = with_baseline(islands=1)
    a.add(cand(1, 1.2, warps=8))
    a.add(cand(2, 1.1, warps=8))  # same cell, worse: not kept in the grid (still in the archive)
    a.add(cand(3, 0.9, warps=2))  # new cell: kept though slower than the baseline
    grid = a.islands[0].cells.values()
    ids = {c.id for c in grid}
    assert 1 in ids and 2 not in ids and 3 in ids and 2 in {c.id for c in a.candidates}
    assert code_features(variant(1, 8))["warps"] == 8


def test_untimed_correct_rank_above_incorrect_and_are_kept():
    a = with_baseline(islands=1)
    a.add(cand(1, None, warps=8))
    a.add(cand(2, 5.0, warps=2, ok=False))
    assert rank(a.candidates[1]) == 1.0 and rank(a.candidates[2]) == -1.0
    assert a.best_correct() is not None and a.elites(5)[-1].id in (0, 1)
    assert all(c.correct for c in a.elites(5))


def test_selection_favours_fitness_and_penalises_many_children():
    a = with_baseline(islands=1)
    a.add(cand(1, 1.5, warps=8))
    a.add(cand(2, 1.5, warps=2))
    picks = [a.select_parent(random.Random(s), 0).id for s in range(600)]
    assert picks.count(1) > picks.count(0) and picks.count(2) > picks.count(0)  # fitter parents chosen more
    for i in range(10, 30):  # candidate 1 already has 20 children
        a.add(cand(i, 0.5, parent=1, warps=1, ok=False))
    picks = [a.select_parent(random.Random(s), 0).id for s in range(600)]
    assert picks.count(2) > 3 * picks.count(1)


def test_inspirations_come_from_the_top_and_from_other_cells():
    a = with_baseline(islands=1)
    for i, (speed, warps) in enumerate([(1.9, 8), (1.5, 2), (1.2, 16), (1.1, 1)], 1):
        a.add(cand(i, speed, warps=warps))
    parent = a.candidates[2]
    insp = a.inspirations(random.Random(1), 0, parent, k=3)
    assert insp[0].id == 1 and parent not in insp and len(insp) == 3
    assert len({id(c) for c in insp}) == 3


def test_duplicates_by_exact_text_and_normalised_ast():
    a = with_baseline(islands=1)
    assert a.seen(SOFTMAX)
    reformatted = SOFTMAX.replace('"""Row softmax over the last dim."""', '"""Another docstring."""').replace(
        "    grid = (num_rows,)", "    grid = ( num_rows , )  # a comment")
    assert reformatted != SOFTMAX and a.seen(reformatted)
    assert not a.seen(SOFTMAX.replace("num_stages=1", "num_stages=2"))
