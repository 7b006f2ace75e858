"""Turning an LLM answer into a candidate source: code blocks, the EVOLVE region, and SEARCH/REPLACE diffs.

A module may mark its editable part with ``# EVOLVE-BLOCK-START`` / ``# EVOLVE-BLOCK-END``; without markers
the whole module is the region. A full rewrite may return the whole module (everything outside the region
must come back unchanged) or only the region's new body. Diffs are applied strictly: each SEARCH text must
occur exactly once; otherwise the error names the closest lines of the parent, for the next attempt.
"""
from __future__ import annotations

import difflib
import re

START, END = "# EVOLVE-BLOCK-START", "# EVOLVE-BLOCK-END"
_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)
_BLOCK = re.compile(r"<<<<<<< SEARCH\n(.*?)\n?=======\n(.*?)\n?>>>>>>> REPLACE", re.DOTALL)


class EditError(ValueError):
    """The answer cannot be turned into a candidate; the message is fed back to the model."""


def split_region(source: str) -> tuple[str, str, str]:
    """(before, region, after); the markers stay in before/after. No markers: the whole module."""
    s, e = source.find(START), source.find(END)
    if s < 0 or e < s:
        return "", source, ""
    s_end = source.index("\n", s) + 1 if "\n" in source[s:] else len(source)
    e_start = source.rfind("\n", 0, e) + 1
    return source[:s_end], source[s_end:e_start], source[e_start:]


def extract_code(text: str) -> str:
    blocks = [b for b in _FENCE.findall(text) if b.strip()]
    if not blocks:
        raise EditError("the answer holds no ```python code block; put the complete code in one fenced block")
    return max(blocks, key=len)


def _norm(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def _outside_change(parent: str, child: str) -> str | None:
    p_before, _, p_after = split_region(parent)
    c_before, _, c_after = split_region(child)
    for name, a, b in (("before", p_before, c_before), ("after", p_after, c_after)):
        if _norm(a) != _norm(b):
            diff = [d for d in difflib.unified_diff(_norm(a), _norm(b), lineterm="", n=0)
                    if d[:1] in "+-" and d[:3] not in ("+++", "---")]
            return (f"the answer changes code {name} the EVOLVE region, which must stay exactly as it is "
                    f"(first changed lines: {' | '.join(diff[:4])[:300]}); change only the code between "
                    f"`{START}` and `{END}`")
    return None


def apply_rewrite(parent: str, answer: str) -> str:
    code = extract_code(answer)
    before, _, after = split_region(parent)
    if not before and not after:
        return code if code.endswith("\n") else code + "\n"
    if START in code or END in code:
        problem = _outside_change(parent, code)
        if problem:
            raise EditError(problem)
        _, region, _ = split_region(code)
    else:
        region = code
    return before + (region if region.endswith("\n") else region + "\n") + after


def parse_diff(answer: str) -> list[tuple[str, str]]:
    blocks = _BLOCK.findall(answer)
    if not blocks:
        raise EditError("the answer holds no SEARCH/REPLACE block (<<<<<<< SEARCH / ======= / >>>>>>> REPLACE)")
    return blocks


def closest_lines(source: str, search: str) -> tuple[int, str]:
    """The window of the source most like ``search``: (1-based first line, text)."""
    lines, want = source.splitlines(), search.splitlines() or [""]
    n = len(want)
    best, at = -1.0, 0
    for i in range(max(1, len(lines) - n + 1)):
        ratio = difflib.SequenceMatcher(None, "\n".join(lines[i:i + n]), search, autojunk=False).ratio()
        if ratio > best:
            best, at = ratio, i
    return at + 1, "\n".join(lines[at:at + n])


def _matches(lines: list[str], want: list[str]) -> list[int]:
    n = len(want)
    return [i for i in range(len(lines) - n + 1) if lines[i:i + n] == want] if n else []


def apply_diff(parent: str, answer: str) -> str:
    """Each SEARCH block must equal whole lines of the source exactly once (whitespace included)."""
    source = parent
    for i, (search, replace) in enumerate(parse_diff(answer), 1):
        lines = source.splitlines()
        want = search.splitlines()
        found = _matches(lines, want)
        if len(found) == 1:
            at = found[0]
            lines[at:at + len(want)] = replace.splitlines()
            source = "\n".join(lines) + "\n"
            continue
        if len(found) > 1:
            raise EditError(f"SEARCH block {i} matches {len(found)} places; include more surrounding lines so "
                            "that it matches exactly one")
        line, text = closest_lines(source, search)
        raise EditError(f"SEARCH block {i} does not match whole lines of the parent exactly (whitespace "
                        f"included). The closest lines of the parent, from line {line}, are:\n{text[:1500]}")
    problem = _outside_change(parent, source)
    if problem:
        raise EditError(problem)
    return source
