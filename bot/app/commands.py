"""Parsing `/kernelsmith ...` commands in comment bodies.

A command is a line of its own that starts with `/kernelsmith` (any case, up to three spaces before it, any
whitespace after it). Lines that Markdown shows as code or hides are never commands: fenced (``` or ~~~) and
indented code blocks, quotes (`> ...`), inline code, HTML comments. So quoting or documenting a command does
not run it. A malformed command becomes `Command.problem`, which the reply names; parsing never raises.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field

PREFIX = "/kernelsmith"
BACKENDS = ("nvidia", "metax", "interpret")
VERBS = ("optimize", "status", "cancel", "help")
MAX_KERNELS = 20  # kernels in one command
MAX_BUDGET_DIGITS = 9

_COMMAND = re.compile(r" {0,3}/kernelsmith(?=\s|$)(.*)", re.IGNORECASE)
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


@dataclass
class Command:
    verb: str  # optimize | status | cancel | help | unknown
    kernels: list[str] = field(default_factory=list)
    budget: int | None = None
    backend: str | None = None
    problem: str = ""  # set when the command is malformed: the reply names it


def shown(word: str, limit: int = 40) -> str:
    """A word of the user's, safe to quote in a reply's inline code: no backticks, no line breaks, bounded."""
    word = re.sub(r"[`\s]+", " ", word).strip()
    return word if len(word) <= limit else word[:limit] + "…"


def _text_lines(body: str) -> Iterator[str]:
    """The lines of ``body`` that Markdown renders as text: fenced code and HTML comments left out."""
    fence, in_comment = "", False
    for line in body.splitlines():
        if in_comment:
            in_comment = "-->" not in line
            continue
        if fence:
            m = _FENCE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line[m.end():].strip():
                fence = ""
            continue
        m = _FENCE.match(line)
        if m:
            fence = m.group(1)
            continue
        start = line.find("<!--")
        if start >= 0 and "-->" not in line[start:]:
            in_comment = True
        yield line


def find_command(body: str | None) -> Command | None:
    """The first command line of the comment, parsed; None when the comment holds no command."""
    for line in _text_lines(body or ""):
        m = _COMMAND.fullmatch(line.rstrip())
        if m:
            return parse(re.sub(r"\s+", " ", m.group(1)))
    return None


def _budget(value: str) -> tuple[int | None, str]:
    if not value:
        return None, "--budget needs a value: `--budget N`"
    if not re.fullmatch(r"[0-9]+", value):
        return None, f"--budget needs a whole number, not `{shown(value)}`"
    if len(value.lstrip("0")) > MAX_BUDGET_DIGITS or int(value) < 1:
        return None, f"--budget must be at least 1 and at most {10 ** MAX_BUDGET_DIGITS - 1}, not `{shown(value)}`"
    return int(value), ""


def parse(rest: str) -> Command:
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        return Command("unknown", problem=f"cannot read the command: {exc}")
    if not words:
        return Command("help")
    verb, args = words[0].lower(), words[1:]
    if verb not in VERBS:
        return Command("unknown", problem=f"unknown command `{shown(verb)}`")
    cmd = Command(verb)
    if verb != "optimize":
        if args:
            cmd.problem = f"`{verb}` takes no arguments"
        return cmd
    it = iter(args)
    for word in it:
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            name = name.lower()
            if not eq and name in ("budget", "backend"):
                value = next(it, "")
            if name == "budget":
                cmd.budget, cmd.problem = _budget(value)
            elif name == "backend":
                if not value:
                    cmd.problem = f"--backend needs a value: one of {', '.join(BACKENDS)}"
                elif value.lower() not in BACKENDS:
                    cmd.problem = f"--backend must be one of {', '.join(BACKENDS)}, not `{shown(value)}`"
                cmd.backend = value.lower()
            else:
                cmd.problem = f"unknown option `--{shown(name)}`"
            if cmd.problem:
                return cmd
        elif word.startswith("-"):
            cmd.problem = f"unknown option `{shown(word)}` (options start with --)"
            return cmd
        elif word not in cmd.kernels:
            cmd.kernels.append(word)
    if len(cmd.kernels) > MAX_KERNELS:
        cmd.problem = f"at most {MAX_KERNELS} kernels in one command, not {len(cmd.kernels)}"
    return cmd
