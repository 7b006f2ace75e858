"""Parsing `/kernelsmith ...` commands in comment bodies."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

PREFIX = "/kernelsmith"
BACKENDS = ("nvidia", "metax", "interpret")
VERBS = ("optimize", "status", "cancel", "help")


@dataclass
class Command:
    verb: str  # optimize | status | cancel | help | unknown
    kernels: list[str] = field(default_factory=list)
    budget: int | None = None
    backend: str | None = None
    problem: str = ""  # set when the command is malformed: the reply names it


def find_command(body: str | None) -> Command | None:
    """The first line starting with /kernelsmith, parsed; None when the comment holds no command."""
    for line in (body or "").splitlines():
        line = line.strip()
        if line == PREFIX or line.startswith(PREFIX + " "):
            return parse(line[len(PREFIX):])
    return None


def parse(rest: str) -> Command:
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        return Command("unknown", problem=f"cannot read the command: {exc}")
    if not words:
        return Command("help")
    verb, args = words[0].lower(), words[1:]
    if verb not in VERBS:
        return Command("unknown", problem=f"unknown command `{verb}`")
    cmd = Command(verb)
    if verb != "optimize":
        if args:
            cmd.problem = f"`{verb}` takes no arguments"
        return cmd
    it = iter(args)
    for word in it:
        if word.startswith("--"):
            name, _, value = word[2:].partition("=")
            value = value or next(it, "")
            if name == "budget":
                if not value.isdigit():
                    cmd.problem = f"--budget needs a whole number, not `{value}`"
                    return cmd
                cmd.budget = int(value)
            elif name == "backend":
                if value not in BACKENDS:
                    cmd.problem = f"--backend must be one of {', '.join(BACKENDS)}, not `{value}`"
                    return cmd
                cmd.backend = value
            else:
                cmd.problem = f"unknown option `--{name}`"
                return cmd
        else:
            cmd.kernels.append(word)
    return cmd
