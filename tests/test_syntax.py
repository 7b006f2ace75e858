"""Parsing is serialised: CPython 3.11's AST constructor is not safe for two threads at once
(python/cpython#106905; it failed this project's CI in the search loop's threads)."""

import re
import threading
from pathlib import Path

from runners import syntax

ROOT = Path(__file__).resolve().parents[1]


def test_no_module_parses_around_the_lock():
    direct = re.compile(r"\bast\.(parse|literal_eval)\(")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for layer in ("bot", "evolver", "runners")
        for path in sorted((ROOT / layer).rglob("*.py"))
        if path.name != "syntax.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if direct.search(line)
    ]
    assert offenders == [], "parse through runners.syntax, not ast directly: " + ", ".join(offenders)


def test_a_parse_waits_for_the_one_in_progress():
    done = threading.Event()

    def parse_in_thread():
        syntax.parse("x = 1")
        done.set()

    with syntax._LOCK:
        worker = threading.Thread(target=parse_in_thread)
        worker.start()
        assert not done.wait(0.2), "a parse ran while another held the lock"
    assert done.wait(5)
    worker.join()


def test_literal_reads_defaults_like_the_standard_library():
    assert syntax.literal("  (1, 'a', None)") == (1, "a", None)
    assert syntax.literal("-2.5") == -2.5
    assert syntax.literal(syntax.parse("[3, 4]", mode="eval").body) == [3, 4]
