"""POST /webhook at the door: signature, size, replay, unknown events; every answer is immediate and nothing
is handled twice."""
import json
import uuid

import httpx

from bot.app.signature import sign

from .conftest import HOOKS, SECRET, payload, wait_for


def test_signature_size_replay_and_unknown_events(serve, stub):
    svc = serve(KS_MAX_BODY="65536")
    raw = (HOOKS / "ping/with-app_id.payload.json").read_bytes()

    assert svc.deliver("ping", raw, secret="not-the-secret").status_code == 401
    assert svc.deliver("ping", raw, signature="sha1=" + "0" * 40).status_code == 401
    bad = httpx.post(f"{svc.url}/webhook", content=raw, headers={"X-GitHub-Event": "ping",
                                                                  "X-GitHub-Delivery": str(uuid.uuid4())})
    assert bad.status_code == 401  # no signature at all

    delivery = str(uuid.uuid4())
    first = svc.deliver("ping", raw, delivery=delivery)
    assert first.status_code == 202 and first.json()["status"] == "queued"
    replay = svc.deliver("ping", raw, delivery=delivery)
    assert replay.status_code == 200 and replay.json()["status"] == "duplicate"

    big = json.dumps({"zen": "x" * 70000}).encode()
    assert svc.deliver("ping", big).status_code == 413

    unknown = svc.deliver("workflow_job", (HOOKS / "workflow_job/queued.payload.json").read_bytes())
    assert unknown.status_code == 202 and unknown.json()["status"] == "ignored"

    assert svc.deliver("ping", b"not json").status_code == 400

    store = svc.db()
    try:
        d = wait_for(lambda: (x := store.delivery(delivery)) and x.state == "done" and x, what="ping handled")
        assert d.outcome.startswith("pong") and d.attempts == 1  # handled once, despite the replay
        assert store.delivery(unknown.json()["delivery"]).state == "ignored"
    finally:
        store.close()
    assert httpx.get(f"{svc.url}/healthz").json()["ok"] is True
    # a comment without a command, as GitHub's example sends it: stored, handled, nothing said
    silent = svc.deliver("issue_comment", payload("issue_comment/created.with-installation.payload.json"))
    assert silent.status_code == 202
    store = svc.db()
    try:
        d = wait_for(lambda: (x := store.delivery(silent.json()["delivery"])) and x.state != "pending" and x)
        assert d.state == "ignored" and d.outcome == "no command in the comment"
    finally:
        store.close()
    assert not stub.calls("POST", r"/comments$")

    # a burst: every delivery acknowledged at once, stored, and handled; none lost
    events = [("ping", "ping/payload.json"), ("pull_request", "pull_request/closed.payload.json"),
              ("installation_repositories", "installation_repositories/added.payload.json"),
              ("check_run", "check_run/rerequested.payload.json")]
    acks = []
    with httpx.Client(timeout=10) as client:
        for i in range(60):
            event, name = events[i % len(events)]
            raw, delivery = (HOOKS / name).read_bytes(), str(uuid.uuid4())
            r = client.post(f"{svc.url}/webhook", content=raw, headers={
                "X-GitHub-Event": event, "X-GitHub-Delivery": delivery,
                "X-Hub-Signature-256": sign(SECRET.encode(), raw)})
            acks.append((delivery, r.status_code, r.elapsed.total_seconds()))
    assert all(code in (200, 202) for _, code, _ in acks)
    assert max(t for _, _, t in acks) < 2.0  # acknowledged without waiting for any work
    store = svc.db()
    try:
        wait_for(lambda: store.pending_deliveries() == 0, what="the burst to be handled")
        states = [store.delivery(d).state for d, _, _ in acks]
        # check_run is not handled; a pull request kernelsmith did not open needs nothing
        assert states.count("done") == 30 and states.count("ignored") == 30
        assert "Codertocat/Space" in [r.full_name for r in store.repositories()]  # installation_repositories
    finally:
        store.close()


def test_serve_starts_with_only_the_secret_the_app_id_and_the_key(tmp_path, app_key):
    """`kernelsmith serve` refuses to start without its three settings, and names what is missing."""
    import os
    import subprocess
    import sys

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "serve"], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, check=False)
    assert proc.returncode == 2
    message = " ".join(proc.stderr.split())
    assert "KS_WEBHOOK_SECRET" in message and "KS_APP_ID" in message and "KS_PRIVATE_KEY" in message
    assert SECRET not in message
    # ...and with exactly those three (plus PATH and HOME) it serves, on the embedded defaults
    from .conftest import APP_ID, free_port

    port = free_port()
    env.update(KS_WEBHOOK_SECRET=SECRET, KS_APP_ID=str(APP_ID), KS_PRIVATE_KEY=app_key[0])
    server = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        health = wait_for(lambda: _get(f"http://127.0.0.1:{port}/healthz"), timeout=90, what="serve to start")
        assert health.json() == {"ok": True, "pending_deliveries": 0}
        assert (tmp_path / "kernelsmith-data" / "kernelsmith.db").is_file()  # SQLite, the embedded default
        assert "No jobs yet" in httpx.get(f"http://127.0.0.1:{port}/").text
    finally:
        server.terminate()
        server.wait(10)


def _get(url):
    try:
        return httpx.get(url, timeout=1)
    except httpx.HTTPError:
        return None
