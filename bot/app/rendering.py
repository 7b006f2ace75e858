"""Jinja environments for the bot's comments (templates/comments) and the job pages (templates/dashboard)."""
from __future__ import annotations

import functools
import importlib.resources

import jinja2


@functools.cache
def _env(autoescape: bool) -> jinja2.Environment:
    loader = jinja2.FunctionLoader(
        lambda name: importlib.resources.files("templates").joinpath(name).read_text(encoding="utf-8"))
    env = jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, autoescape=autoescape,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["speedup"] = lambda v: "–" if v is None else f"{v:.3f}x"
    return env


def comment(name: str, **context) -> str:
    return _env(False).get_template(f"comments/{name}.md.j2").render(**context).strip() + "\n"


def page(name: str, **context) -> str:
    return _env(True).get_template(f"dashboard/{name}.html.j2").render(**context)
