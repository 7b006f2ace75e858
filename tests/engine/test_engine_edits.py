"""Turning answers into candidates: code blocks, the EVOLVE region, strict SEARCH/REPLACE diffs."""
import pytest

from evolver.edits import (
    END,
    START,
    EditError,
    apply_diff,
    apply_rewrite,
    extract_code,
    split_region,
)

MODULE = f'''import torch

HELPER = 1
{START}
def kernel(x):
    return x + 1
{END}

def entry(x):
    return kernel(x)
'''


def fenced(code: str) -> str:
    return f"Here it is.\n\n```python\n{code}```\n"


def test_region_body_alone_is_spliced_in():
    new = apply_rewrite(MODULE, fenced("def kernel(x):\n    return x + 2\n"))
    assert "return x + 2" in new and new.startswith("import torch") and new.endswith("return kernel(x)\n")
    assert split_region(new)[0] == split_region(MODULE)[0]


def test_full_module_with_unchanged_outside_is_accepted():
    assert "x * 1 + 1" in apply_rewrite(MODULE, fenced(MODULE.replace("return x + 1", "return x * 1 + 1")))


def test_change_outside_the_region_is_refused_with_the_lines():
    with pytest.raises(EditError) as err:
        apply_rewrite(MODULE, fenced(MODULE.replace("HELPER = 1", "HELPER = 2").replace("x + 1", "x + 3")))
    assert "before the EVOLVE region" in str(err.value) and "HELPER = 2" in str(err.value)
    with pytest.raises(EditError, match="after the EVOLVE region"):
        apply_rewrite(MODULE, fenced(MODULE.replace("return kernel(x)", "return kernel(x) * 0")))


def test_without_markers_the_whole_module_is_the_region():
    plain = "def entry(x):\n    return x\n"
    assert apply_rewrite(plain, fenced("def entry(x):\n    return x * 1\n")) == "def entry(x):\n    return x * 1\n"


def test_missing_code_block_is_an_edit_error():
    with pytest.raises(EditError, match="no ```python code block"):
        extract_code("I think the kernel is fine.")
    assert extract_code("```\nshort\n```\n```python\nthe longer block\n```") == "the longer block\n"


def test_diff_applies_strictly():
    d = "<<<<<<< SEARCH\n    return x + 1\n=======\n    return x + 10\n>>>>>>> REPLACE\n"
    assert "return x + 10" in apply_diff(MODULE, d)


def test_diff_that_does_not_match_names_the_closest_lines():
    d = "<<<<<<< SEARCH\n  return x + 1\n=======\n  return x + 10\n>>>>>>> REPLACE\n"
    with pytest.raises(EditError) as err:
        apply_diff(MODULE, d)
    assert "does not match" in str(err.value) and "from line 6" in str(err.value)
    assert "    return x + 1" in str(err.value)


def test_ambiguous_and_outside_diffs_are_refused():
    twice = MODULE + "\ndef other(x):\n    return x + 1\n"
    with pytest.raises(EditError, match="matches 2 places"):
        apply_diff(twice, "<<<<<<< SEARCH\n    return x + 1\n=======\n    return x\n>>>>>>> REPLACE")
    with pytest.raises(EditError, match="after the EVOLVE region"):
        apply_diff(MODULE, "<<<<<<< SEARCH\n    return kernel(x)\n=======\n    return x\n>>>>>>> REPLACE")
    with pytest.raises(EditError, match="no SEARCH/REPLACE block"):
        apply_diff(MODULE, fenced("def kernel(x):\n    return x\n"))
