"""Reading PyGithub's recorded exchanges: scheme, method, host, port, path, request headers, request body,
status, response headers, response body, then a blank line."""
from __future__ import annotations

import ast
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(os.environ.get("KS_FIXTURES", Path(__file__).resolve().parents[3] / "shared" / "fixtures"))
REST = FIXTURES / "github-rest"


@dataclass
class Exchange:
    method: str
    path: str
    request_body: dict | None
    status: int
    response_headers: dict
    response_body: object


@functools.cache
def exchanges(name: str) -> tuple[Exchange, ...]:
    lines = [line.rstrip("\n") for line in (REST / f"{name}.txt").read_text().split("\n")]
    out, i = [], 0
    while i + 9 < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        block = lines[i:i + 10]
        body = block[6].strip()
        resp = block[9].strip()
        out.append(Exchange(method=block[1], path=block[4], request_body=json.loads(body) if body and body != "None"
                            else None, status=int(block[7]), response_headers=dict(ast.literal_eval(block[8])),
                            response_body=json.loads(resp) if resp else None))
        i += 10
    return tuple(out)


def recorded(name: str, method: str, path_contains: str = "") -> Exchange:
    """The first recorded exchange in ``name`` with that method whose path contains ``path_contains``."""
    for ex in exchanges(name):
        if ex.method == method and path_contains in ex.path:
            return ex
    raise KeyError(f"{name}: no {method} {path_contains}")
