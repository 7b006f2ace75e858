"""Load benchmark of `kernelsmith serve`'s webhook on loopback: N signed deliveries paced over a window,
each acknowledged, the latency of every acknowledgement, and none lost (every delivery stored and handled).

    .venv/bin/python bench/webhooks.py --deliveries 200 --seconds 10 --rounds 3 --out bench/results/webhooks-loopback.json

It starts the service itself with nothing but a webhook secret, an App id and a throw-away key (SQLite in a
temporary folder, local dispatch). The deliveries are GitHub's example payloads
(shared/fixtures/github-webhooks) of events the service handles without calling GitHub: ping, installation,
push (a tag), pull_request, an issue comment without a command, and an event it ignores (workflow_job).
Only 127.0.0.1 is contacted.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import hmac
import json
import os
import platform
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from importlib.metadata import version
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
HOOKS = Path(os.environ.get("KS_FIXTURES", ROOT.parent / "shared" / "fixtures")) / "github-webhooks"
MIX = [("ping", "ping/with-app_id.payload.json"), ("installation", "installation/created.payload.json"),
       ("push", "push/with-installation.payload.json"), ("pull_request", "pull_request/opened.payload.json"),
       ("issue_comment", "issue_comment/created.with-installation.payload.json"),
       ("workflow_job", "workflow_job/queued.payload.json")]
SECRET = b"bench-secret"


def _key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _send(client, url, event, body, at, t0):
    await asyncio.sleep(max(0.0, t0 + at - time.perf_counter()))
    delivery = str(uuid.uuid4())
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "Content-Type": "application/json",
               "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()}
    start = time.perf_counter()
    try:
        r = await client.post(url, content=body, headers=headers)
        status = r.status_code
    except httpx.HTTPError as exc:
        status = f"error: {type(exc).__name__}"
    return {"delivery": delivery, "event": event, "status": status, "ms": (time.perf_counter() - start) * 1000}


async def _load(url: str, n: int, seconds: float) -> list[dict]:
    bodies = [(event, (HOOKS / name).read_bytes()) for event, name in MIX]
    async with httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_connections=16)) as client:
        t0 = time.perf_counter()
        return await asyncio.gather(*[_send(client, url, *bodies[i % len(bodies)], i * seconds / n, t0)
                                      for i in range(n)])


def run_round(n: int, seconds: float) -> dict:
    """One round: a fresh service, ``n`` deliveries over ``seconds``, then every delivery checked in the store."""
    with tempfile.TemporaryDirectory(prefix="ks-bench-") as tmp:
        port = _port()
        env = {"PATH": os.environ["PATH"], "HOME": tmp, "KS_WEBHOOK_SECRET": SECRET.decode(), "KS_APP_ID": "1",
               "KS_PRIVATE_KEY": _key(), "KS_DATA_DIR": str(Path(tmp) / "data")}
        server = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port",
                                   str(port)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + 120
            while True:
                try:
                    if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    if time.time() > deadline or server.poll() is not None:
                        raise SystemExit("the service did not start") from None
                    time.sleep(0.2)
            began = time.perf_counter()
            results = asyncio.run(_load(base + "/webhook", n, seconds))
            window = time.perf_counter() - began
            deadline = time.time() + 60  # every stored delivery must be handled
            while httpx.get(base + "/healthz").json()["pending_deliveries"] and time.time() < deadline:
                time.sleep(0.2)
        finally:
            server.terminate()
            server.wait(10)
        db = sqlite3.connect(Path(tmp) / "data" / "kernelsmith.db")
        stored = dict(db.execute("SELECT id, state FROM deliveries").fetchall())
        db.close()
    ms = sorted(r["ms"] for r in results)
    acked = [r for r in results if r["status"] in (200, 202)]
    lost = [r["delivery"] for r in results if stored.get(r["delivery"]) not in ("done", "ignored")]
    p99 = ms[min(len(ms) - 1, round(0.99 * len(ms)) - 1)]
    return {
        "deliveries": len(results), "acknowledged": len(acked), "window_s": round(window, 3),
        "latency_ms": {"p50": round(statistics.median(ms), 2), "p90": round(ms[int(0.9 * len(ms)) - 1], 2),
                       "p99": round(p99, 2), "max": round(ms[-1], 2), "mean": round(statistics.fmean(ms), 2)},
        "stored": len(stored), "lost": lost,
        "handled": {s: list(stored.values()).count(s) for s in sorted(set(stored.values()))},
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "pass": len(acked) == len(results) and not lost and p99 < 100.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deliveries", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3, help="each round starts a fresh service")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rounds = [run_round(args.deliveries, args.seconds) for _ in range(args.rounds)]
    summary = {
        "what": f"{args.deliveries} signed webhook deliveries paced over {args.seconds:g} s to kernelsmith serve "
                "on 127.0.0.1 (uvicorn, SQLite, local dispatch), one fresh service per round",
        "criteria": "every delivery acknowledged (202/200), none lost (stored and handled), p99 latency < 100 ms",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "note": "2 shared cores; other test suites were running (see each round's load average)"},
        "versions": {p: version(p) for p in ("fastapi", "uvicorn", "starlette", "SQLAlchemy", "PyGithub", "httpx")},
        "events": [event for event, _ in MIX],
        "rounds": rounds,
        "pass": all(r["pass"] for r in rounds),
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0 if summary["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
