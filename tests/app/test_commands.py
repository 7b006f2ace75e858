"""Commands that end in a short reply, never in a crash: no permission, a bot, an unknown command, an unknown
kernel, an over-limit budget, an unavailable backend, an invalid config (on a command, and on a push)."""
import yaml

from .conftest import READER, REPO, command, payload, wait_for


def replies(stub, issue=1):
    return [c.body for c in stub.comments_on(issue) if c.user == "kernelsmith[bot]"]


def handled(svc, response):
    store = svc.db()
    try:
        return wait_for(lambda: (d := store.delivery(response.json()["delivery"])) and d.state != "pending" and d,
                        what="the delivery to be handled")
    finally:
        store.close()


def test_replies_and_refusals(serve, stub, remote):
    svc = serve(KS_MAX_BUDGET="50", KS_JOBS_PER_HOUR="0")

    def say(text, **kw):
        before = len(replies(stub))
        p = command(text, stub, **kw)
        d = handled(svc, svc.deliver("issue_comment", p))
        new = replies(stub)[before:]
        return d, new, p

    d, new, p = say("/kernelsmith optimize rms_norm", login=READER)
    assert d.outcome == f"denied: {READER} has read permission"
    assert len(new) == 1 and "only users with write access" in new[0] and f"@{READER}" in new[0]
    assert stub.comments[p["comment"]["id"]].reactions == ["eyes"]  # seen at once, even when refused

    d, new, p = say("/kernelsmith optimize rms_norm", login="dependabot[bot]", kind="Bot")
    assert d.outcome.startswith("ignored") and new == [] and stub.comments[p["comment"]["id"]].reactions == []

    d, new, _ = say("/kernelsmith frobnicate")
    assert "unknown command `frobnicate`" in new[0] and "/kernelsmith optimize" in new[0]
    d, new, _ = say("/kernelsmith help")
    assert "/kernelsmith cancel" in new[0]
    d, new, _ = say("/kernelsmith optimize no_such_kernel")
    assert "unknown kernel(s) `no_such_kernel`" in new[0] and "`rms_norm`" in new[0]
    d, new, _ = say("/kernelsmith optimize rms_norm --budget 500")
    assert "over this installation's limit of 50" in new[0]
    d, new, _ = say("/kernelsmith optimize rms_norm --budget many")
    assert "--budget needs a whole number" in new[0]
    d, new, _ = say("/kernelsmith optimize rms_norm --backend metax")
    assert "`metax` backend is not available" in new[0]
    d, new, _ = say("/kernelsmith optimize rms_norm --backend nvidia")
    assert "no NVIDIA GPU" in new[0]
    d, new, _ = say("/kernelsmith optimize rms_norm --backend interpret")
    assert "the limit is 0 an hour" in new[0]  # the repository's rate limit
    d, new, _ = say("/kernelsmith status")
    assert f"jobs in {REPO}: none" in new[0]
    d, new, _ = say("/kernelsmith cancel")
    assert "cancelling 0 job(s)" in new[0]

    # An invalid config: the reply names the line.
    config = yaml.safe_load((remote.work / ".github/kernelsmith.yml").read_text())
    text = yaml.safe_dump(config, sort_keys=False).replace("entry: rms_norm", "entry: rms_norm\n    colour: blue", 1)
    line = text.splitlines().index("    colour: blue") + 1
    sha = remote.commit("a typo in the config", {".github/kernelsmith.yml": text})
    d, new, _ = say("/kernelsmith optimize rms_norm")
    assert d.outcome.startswith("invalid config")
    assert f"line {line}" in new[0] and "colour" in new[0] and sha[:7] in new[0]

    # The push that made it invalid gets a commit comment naming the same line.
    push = payload("push/with-installation.payload.json")
    push.update(ref="refs/heads/master", after=sha, created=False, deleted=False,
                commits=[{"id": sha, "added": [], "removed": [], "modified": [".github/kernelsmith.yml"]}])
    d = handled(svc, svc.deliver("push", push))
    assert d.outcome == f"push: invalid config, commented on {sha[:7]}"
    [cc] = stub.commit_comments
    assert cc["sha"] == sha and f"line {line}" in cc["body"]
    store = svc.db()
    try:
        assert store.jobs() == []  # nothing was started by any of it
    finally:
        store.close()
