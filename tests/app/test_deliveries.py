"""Every kind of webhook delivery, through the real service over HTTP: each is acknowledged or refused with the
right status (never a 500), and each one stored ends in a recorded state with its reason (handled: `done`;
nothing to do: `ignored`), never lost, never a crash.

First every payload GitHub's examples hold (tests/../shared/fixtures/github-webhooks), unchanged; then what a
real GitHub (or anyone who can sign) also sends, made by changing those payloads here: edits, bots and
kernelsmith's own comments, commands in code and quotes, odd whitespace and case, bad arguments, missing
fields, unknown actions and events, bodies that are not one JSON object, replays, a command given twice."""
import copy
import json
import socket
import urllib.parse
import uuid

import httpx
from sqlalchemy import select

from bot.app.signature import sign
from bot.jobs.models import Delivery

from .conftest import APP_ID, HOOKS, INSTALLATION, MAINTAINER, REPO, SECRET, command, job_state, payload, wait_for
from .test_commands import handled, replies
from .test_comment_to_pr import finished

NOT_HANDLED = ("ignored", "is not handled")
NOT_KS_PR = ("ignored", "#2 is not a kernelsmith pull request")
EXPECTED = {  # every example payload: (state, words its outcome holds)
    "check_run/requested_action.payload.json": NOT_HANDLED,
    "check_run/rerequested.payload.json": NOT_HANDLED,
    "installation/created.payload.json": ("done", "installation 957387 created: 1 repositories active: "
                                                  "Codertocat/Hello-World"),
    "installation/deleted.payload.json": ("done", "installation 2 deleted: 1 repositories inactive: "
                                                  "octocat/Hello-World"),
    "installation_repositories/added.payload.json": ("done", "installation 957387 added: 1 repositories active: "
                                                             "Codertocat/Space"),
    "installation_repositories/removed.payload.json": ("done", "installation 2 removed: 1 repositories inactive: "
                                                               "octocat/Hello-World"),
    "issue_comment/created.payload.json": ("ignored", "no command in the comment"),
    "issue_comment/created.with-installation.payload.json": ("ignored", "no command in the comment"),
    "issue_comment/deleted.payload.json": ("ignored", "comment deleted: nothing to do"),
    "ping/payload.json": ("done", "pong (zen: "),
    "ping/with-app_id.payload.json": ("done", "pong (zen: Anything added dilutes everything else.)"),
    "pull_request/closed.payload.json": NOT_KS_PR,
    "pull_request/opened.payload.json": ("ignored", "pull_request opened: nothing to do"),
    "pull_request/opened.with-null-body.json": ("ignored", "pull_request opened: nothing to do"),
    "pull_request/reopened.payload.json": NOT_KS_PR,
    "push/payload.json": ("ignored", "push to refs/tags/simple-tag: not the default branch"),
    "push/with-installation.payload.json": ("ignored", "push to refs/tags/simple-tag: not the default branch"),
    "workflow_job/completed.success.with-organization.payload.json": NOT_HANDLED,
    "workflow_job/queued.payload.json": NOT_HANDLED,
    "workflow_run/completed.payload.json": NOT_HANDLED,
    "workflow_run/requested.payload.json": NOT_HANDLED,
}


def post(svc, event: str, raw: bytes, delivery: str | None = None, **headers) -> httpx.Response:
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
               "X-Hub-Signature-256": sign(SECRET.encode(), raw), "Content-Type": "application/json", **headers}
    return httpx.post(f"{svc.url}/webhook", content=raw, headers=headers, timeout=10)


def all_deliveries(svc) -> list[Delivery]:
    store = svc.db()
    try:
        with store.session() as s:
            return list(s.scalars(select(Delivery)))
    finally:
        store.close()


def settled(svc, deliveries: list[str]) -> dict[str, Delivery]:
    store = svc.db()
    try:
        wait_for(lambda: store.pending_deliveries() == 0, what="every delivery to be handled")
        return {d: store.delivery(d) for d in deliveries}
    finally:
        store.close()


def no_crash(svc) -> None:
    """Nothing stored failed and the service logged no traceback (no 500, no handler crash)."""
    failed = [(d.event, d.outcome) for d in all_deliveries(svc) if d.state not in ("done", "ignored")]
    assert not failed, failed
    assert "Traceback" not in svc.log.read_text()


def test_every_example_payload_is_acknowledged_stored_and_settled(serve, stub):
    files = sorted(p for p in HOOKS.rglob("*.json"))
    assert sorted(str(p.relative_to(HOOKS)) for p in files) == sorted(EXPECTED)  # a new example must be listed
    svc = serve()
    sent = {}
    for path in files:
        event, raw = path.relative_to(HOOKS).parts[0], path.read_bytes()
        r = post(svc, event, raw)
        assert r.status_code in (200, 202) and r.json()["status"] in ("queued", "ignored"), (path, r.text)
        sent[r.json()["delivery"]] = (str(path.relative_to(HOOKS)), event, raw)
    got = settled(svc, list(sent))
    for delivery, (name, event, raw) in sent.items():
        d = got[delivery]
        state, words = EXPECTED[name]
        assert d is not None and d.event == event and d.payload == raw.decode(), name  # stored as sent
        assert d.state == state and words in d.outcome, (name, d.state, d.outcome)
        assert d.attempts == (0 if words == "is not handled" else 1), name
    assert len(all_deliveries(svc)) == len(files)  # nothing lost, nothing made twice

    # the installation events moved the stored repositories: created and added are active with their
    # installation, deleted and removed are not
    store = svc.db()
    try:
        repos = {name: store.repository(name) for name in ("Codertocat/Hello-World", "Codertocat/Space",
                                                            "octocat/Hello-World")}
        assert [(r.active, r.installation_id) for r in repos.values()] == [(True, 957387), (True, 957387),
                                                                           (False, 2)]
        assert sorted(r.full_name for r in store.repositories()) == ["Codertocat/Hello-World", "Codertocat/Space"]
    finally:
        store.close()
    assert stub.requests == []  # none of the examples asked anything of GitHub

    # GitHub redelivering every one of them (the same delivery ids): acknowledged, and handled only once
    for delivery, (name, event, raw) in sent.items():
        r = post(svc, event, raw, delivery=delivery)
        assert r.status_code == 200 and r.json()["status"] == "duplicate", name
    again = settled(svc, list(sent))
    assert [(d.state, d.attempts, d.outcome) for d in again.values()] == \
        [(d.state, d.attempts, d.outcome) for d in got.values()]
    no_crash(svc)


def test_requests_that_are_not_one_signed_json_object_are_refused_at_the_door(serve, stub):
    svc = serve(KS_MAX_BODY="65536")
    ping = (HOOKS / "ping/with-app_id.payload.json").read_bytes()
    refused = {
        "not JSON": (b"not json", 400, "not JSON"),
        "a JSON array": (b"[1, 2]", 400, "an array, not an object"),
        "a JSON string": (b'"ping"', 400, "a string, not an object"),
        "JSON null": (b"null", 400, "null, not an object"),
        "a JSON number": (b"42", 400, "a number, not an object"),
        "nested too deeply": (b"[" * 20000 + b"]" * 20000, 400, "nested too deeply"),
        "not UTF-8": (b'{"zen": "\xff\xfe"}', 400, "not UTF-8"),
        "a lone surrogate": (b'{"zen": "\\ud800"}', 400, "unpaired UTF-16 surrogate"),
        "empty": (b"", 400, "not JSON"),
        "over the size limit": (json.dumps({"zen": "x" * 70000}).encode(), 413, "larger than 65536"),
    }
    for what, (raw, status, words) in refused.items():
        r = post(svc, "ping", raw)
        assert r.status_code == status and words in r.json()["error"], (what, r.status_code, r.text)

    # the size limit holds without a Content-Length too (a chunked body)
    def chunks():
        for _ in range(40):
            yield b" " * 4096
    r = httpx.post(f"{svc.url}/webhook", content=chunks(), timeout=10,
                   headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": str(uuid.uuid4())})
    assert r.status_code == 413
    for headers, words in (({"X-GitHub-Event": "../../etc/passwd"}, "X-GitHub-Event must be"),
                           ({"X-GitHub-Event": "x" * 51}, "X-GitHub-Event must be"),
                           ({"X-GitHub-Delivery": "d" * 101}, "X-GitHub-Delivery must be"),
                           ({"X-GitHub-Delivery": "a b"}, "X-GitHub-Delivery must be"),
                           ({"X-GitHub-Delivery": ""}, "are required")):
        r = post(svc, headers.pop("X-GitHub-Event", "ping"), ping, **headers)
        assert r.status_code == 400 and words in r.json()["error"], (headers, r.text)
    # a sender that goes away mid-body: nothing stored, nothing logged as a crash, the door still open
    with socket.create_connection(("127.0.0.1", svc.port)) as sock:
        sock.sendall(b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000\r\n"
                     b"X-GitHub-Event: ping\r\nX-GitHub-Delivery: cut-short\r\n\r\n" + ping[:100])
    assert post(svc, "ping", b"[]").status_code == 400
    assert all_deliveries(svc) == []  # nothing refused was stored

    # accepted: a paired surrogate (an emoji) escaped, a form-encoded delivery, an event the App does not know
    emoji = post(svc, "ping", b'{"zen": "\\ud83d\\ude00 keep it logically awesome"}')
    form = urllib.parse.urlencode({"payload": ping.decode()}).encode()
    formed = post(svc, "ping", form, **{"Content-Type": "application/x-www-form-urlencoded"})
    unknown = post(svc, "sponsorship", ping)
    assert [r.status_code for r in (emoji, formed, unknown)] == [202, 202, 202]
    assert unknown.json()["status"] == "ignored"
    # a well-formed object that lacks what the handler needs, or holds the wrong types, is stored and ignored
    odd = [post(svc, "issue_comment", json.dumps(body).encode()) for body in (
        {"action": {"not": "a string"}, "comment": {"id": 1}},
        {"action": "created", "issue": {"number": 1}, "repository": {"full_name": REPO}},
        {"action": "created", "comment": {"id": 10**30, "body": "/kernelsmith help"}, "issue": {"number": 1},
         "repository": {"full_name": REPO}, "sender": {"login": MAINTAINER}},
        {"action": "created", "comment": {"id": 5, "body": "/kernelsmith help"}, "issue": {"number": "one"},
         "repository": {"full_name": "no-slash"}, "sender": {"login": MAINTAINER}})]
    odd += [post(svc, event, b'{"action": "created"}') for event in ("push", "installation", "pull_request")]
    assert all(r.status_code == 202 for r in odd)
    got = settled(svc, [r.json()["delivery"] for r in (emoji, formed, unknown, *odd)])
    outcomes = [(d.state, d.outcome) for d in got.values()]
    assert outcomes[0] == ("done", "pong (zen: \N{GRINNING FACE} keep it logically awesome)")
    assert outcomes[1] == ("done", "pong (zen: Anything added dilutes everything else.)")
    assert outcomes[2] == ("ignored", "event sponsorship is not handled")
    assert all(state == "ignored" and outcome.startswith("malformed ") for state, outcome in outcomes[3:]), outcomes
    assert "action: Input should be a valid string" in outcomes[3][1] and "issue: Field required" in outcomes[3][1]
    assert "comment: Field required" in outcomes[4][1]
    assert "comment.id: Input should be less than or equal" in outcomes[5][1]
    assert "issue.number" in outcomes[6][1] and "repository.full_name" in outcomes[6][1]
    assert [o.split(":")[0] for _, o in outcomes[7:]] == ["malformed push payload", "malformed installation payload",
                                                          "malformed pull_request payload"]

    # a replay of a delivery id, even with another body, is acknowledged and changes nothing
    first = formed.json()["delivery"]
    replay = post(svc, "issue_comment", json.dumps(command("/kernelsmith help", stub)).encode(), delivery=first)
    assert replay.status_code == 200 and replay.json()["status"] == "duplicate"
    store = svc.db()
    try:
        d = store.delivery(first)
        assert (d.event, d.state, d.attempts) == ("ping", "done", 1)
    finally:
        store.close()
    assert not stub.calls("POST", r"/comments$")
    no_crash(svc)


def test_comment_variations_end_in_a_reply_or_a_stated_reason(serve, stub):
    svc = serve()

    def say(p, expect_state="done", event="issue_comment"):
        before = len(replies(stub, p["issue"]["number"]))
        r = svc.deliver(event, p)
        assert r.status_code == 202, r.text
        d = handled(svc, r)
        assert d.state == expect_state, (d.state, d.outcome)
        return d, replies(stub, p["issue"]["number"])[before:]

    def reactions(p):
        return stub.comments[p["comment"]["id"]].reactions

    # the same signed comment again under a new delivery id (a replay, not GitHub): answered once
    p = command("/kernelsmith help", stub)
    d, new = say(p)
    assert d.outcome == "help" and len(new) == 1
    d, new = say(p, "ignored")
    assert "was acted on already, by delivery" in d.outcome and new == [] and reactions(p) == ["eyes"]

    # an edit: commands come from new comments only
    p = command("/kernelsmith optimize rms_norm", stub)
    p.update(action="edited", changes={"body": {"from": "/kernelsmith optimise rms_norm"}})
    d, new = say(p, "ignored")
    assert "comment edited: commands are read from new comments only" in d.outcome and new == [] and not reactions(p)

    # bots: by type, by login, and by the comment's author when the sender is missing
    for login, kind in (("renovate[bot]", "Bot"), ("ci-robot", "Bot"), ("helper[bot]", "User")):
        p = command("/kernelsmith optimize rms_norm", stub, login=login, kind=kind)
        d, new = say(p, "ignored")
        assert d.outcome == f"ignored: {login} is a bot" and new == [] and not reactions(p)
    p = command("/kernelsmith help", stub)
    del p["sender"]
    p["comment"]["user"].update(login="ci-robot", type="Bot")
    d, new = say(p, "ignored")
    assert d.outcome == "ignored: ci-robot is a bot" and new == []

    # kernelsmith's own comments, whatever the sender says: never a reaction to itself
    echo = f"@{MAINTAINER}: already queued or running\n/kernelsmith help"
    own = command(echo, stub, login="kernelsmith[bot]", kind="Bot")
    own["comment"]["performed_via_github_app"] = {"id": APP_ID, "slug": "kernelsmith"}
    d, new = say(own, "ignored")
    assert d.outcome == "ignored: the comment is kernelsmith's own" and new == [] and not reactions(own)
    own["sender"]["type"], own["comment"]["id"] = "User", stub.add_comment(1, echo, MAINTAINER)
    assert say(own, "ignored")[0].outcome == "ignored: the comment is kernelsmith's own"
    status = command("<!-- kernelsmith:job:1 -->\n/kernelsmith optimize rms_norm", stub)
    assert say(status, "ignored")[0].outcome == "ignored: the comment is kernelsmith's own"
    d, new = say(command(echo, stub))  # the same words from a person are a command
    assert d.outcome == "help" and len(new) == 1

    # whitespace and case: still the command
    for text, outcome in (("  /KernelSmith \t STATUS  ", "status"), ("Thanks!\r\n/kernelsmith\thelp\r\n", "help"),
                          ("/kernelsmith\u00a0Status", "status"), ("/kernelsmith", "help")):
        p = command(text, stub)
        d, new = say(p)
        assert d.outcome == outcome and len(new) == 1 and reactions(p) == ["eyes"], text

    # in code, quoted, commented out: not a command
    for text in ("```\n/kernelsmith optimize rms_norm\n```", "~~~sh\n/kernelsmith optimize rms_norm\n~~~",
                 "    /kernelsmith optimize rms_norm", "\t/kernelsmith optimize rms_norm",
                 "> /kernelsmith optimize rms_norm", "`/kernelsmith optimize rms_norm`",
                 "<!--\n/kernelsmith optimize rms_norm\n-->", "/kernelsmithoptimize rms_norm",
                 "please run /kernelsmith optimize rms_norm"):
        p = command(text, stub)
        d, new = say(p, "ignored")
        assert d.outcome == "no command in the comment" and new == [] and not reactions(p), text
    d, new = say(command("> /kernelsmith optimize softmax\n\n```\n/kernelsmith cancel\n```\nSure:\n/kernelsmith status",
                         stub))
    assert d.outcome == "status" and "jobs in" in new[0]

    # unknown commands and bad arguments: the help text with the problem named
    for text, problem in (("/kernelsmith frobnicate", "unknown command `frobnicate`"),
                          ("/kernelsmith optimize --budget 0", "--budget must be at least 1"),
                          ("/kernelsmith optimize --budget -3", "--budget needs a whole number, not `-3`"),
                          ("/kernelsmith optimize --budget \u00b2", "--budget needs a whole number"),
                          ("/kernelsmith optimize --budget 99999999999999999999", "at most 999999999"),
                          ("/kernelsmith optimize --budget", "--budget needs a value"),
                          ("/kernelsmith optimize --backend", "--backend needs a value"),
                          ("/kernelsmith optimize --backend cuda", "--backend must be one of"),
                          ("/kernelsmith optimize rms_norm --frob", "unknown option `--frob`"),
                          ("/kernelsmith optimize -x", "unknown option `-x`"),
                          ("/kernelsmith optimize 'rms_norm", "cannot read the command"),
                          ("/kernelsmith status now", "`status` takes no arguments"),
                          ("/kernelsmith optimize " + " ".join(f"k{i}" for i in range(30)), "at most 20 kernels"),
                          ("/kernelsmith `@everyone`", "unknown command `@everyone`")):
        d, new = say(command(text, stub))
        assert d.outcome == f"answered: {d.outcome.removeprefix('answered: ')}" and problem in d.outcome, (text, d)
        assert len(new) == 1 and problem in new[0] and "/kernelsmith optimize [kernel" in new[0], text
    d, new = say(command("/kernelsmith optimize rms`_norm @everyone", stub))
    assert "unknown kernel(s) `rms _norm`, `@everyone`" in new[0]  # quoted as code: no backtick breaks out

    # a pull request's conversation, an issue's, no installation in the payload, no organization, no sender
    p = command("/kernelsmith status", stub, issue=2)
    p["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{REPO}/pulls/2"}
    assert say(p)[0].outcome == "status" and replies(stub, 2)
    p = command("/kernelsmith status", stub)
    del p["installation"], p["organization"]
    assert say(p)[0].outcome == "status" and stub.calls("GET", rf"/repos/{REPO}/installation$")
    p = command("/kernelsmith cancel", stub)
    del p["sender"]  # who wrote it comes from the comment: the maintainer may cancel
    d, new = say(p)
    assert d.outcome == "cancelling 0 job(s): none was running" and f"@{MAINTAINER}" in new[0]
    p = command("/kernelsmith help", stub)
    p["comment"]["body"] = None
    assert say(p, "ignored")[0].outcome == "no command in the comment"
    elsewhere = command("/kernelsmith help", stub)
    del elsewhere["installation"]
    elsewhere["repository"]["full_name"] = "Codertocat/Elsewhere"
    d, new = say(elsewhere, "ignored")
    assert d.outcome == "the App is not installed on Codertocat/Elsewhere (the delivery names no installation)"

    # actions GitHub may add, on every event the App handles
    for event, name in (("issue_comment", "issue_comment/created.with-installation.payload.json"),
                        ("pull_request", "pull_request/opened.payload.json"),
                        ("installation", "installation/created.payload.json"),
                        ("installation_repositories", "installation_repositories/added.payload.json")):
        p = payload(name)
        p["action"] = "transmogrified"
        r = svc.deliver(event, p)
        d = handled(svc, r)
        assert d.state == "ignored" and "transmogrified: nothing to do" in d.outcome, (event, d.outcome)

    store = svc.db()
    try:
        assert store.jobs() == []  # none of it started work
        assert store.repository("Codertocat/Elsewhere") is None  # nor registered a repository the App is not on
    finally:
        store.close()
    no_crash(svc)


def _pull_request(action: str, number: int, head: str, merged: bool = False, head_repo: str = REPO) -> dict:
    p = payload("pull_request/closed.payload.json")
    p.update(action=action, number=number)
    pr = p["pull_request"]
    pr.update(number=number, merged=merged, state="open" if action == "reopened" else "closed")
    pr["head"].update(ref=head, label=f"Codertocat:{head}")
    pr["head"]["repo"] = copy.deepcopy(pr["head"]["repo"]) | {"full_name": head_repo}
    pr["merged_by"] = {"login": MAINTAINER, "type": "User"} if merged else None
    return p


def test_one_job_for_a_command_given_twice_and_its_pull_request_followed(serve, stub, remote):
    svc = serve("app.pipelines:slow")
    first = command("/KernelSmith Optimize RMS_NORM --Budget=2 --backend INTERPRET", stub)
    r1 = svc.deliver("issue_comment", first)
    r2 = svc.deliver("issue_comment", command("/kernelsmith optimize rms_norm --backend interpret", stub))
    again = svc.deliver("issue_comment", first)  # the first comment delivered again, as a new delivery
    d1, d2, d3 = handled(svc, r1), handled(svc, r2), handled(svc, again)
    assert d1.outcome == "queued job(s) [1]"
    assert d2.outcome == "already running: ['rms_norm']"
    assert d3.state == "ignored" and d3.outcome == \
        f"comment {first['comment']['id']} was acted on already, by delivery {r1.json()['delivery']} (a replay)"
    assert "already queued or running: `rms_norm` on `interpret` (job 1)" in replies(stub)[-1]
    job = finished(svc, 1)
    assert job.state == "done" and job.kernel == "rms_norm" and job.options["budget"] == 2 and job.pr_number
    assert job_state(svc, 2) is None  # one job
    branch = "kernelsmith/rms_norm-interpret"

    # the pull request kernelsmith opened is merged: the job says so (once, however often it is delivered)
    merged = _pull_request("closed", job.pr_number, branch, merged=True)
    for _ in range(2):
        d = handled(svc, svc.deliver("pull_request", merged))
        assert d.state == "done" and d.outcome == f"pull request #{job.pr_number} merged by {MAINTAINER}: " \
                                                  "noted on job(s) [1]"
    noted = job_state(svc, 1)
    assert noted.state == "done" and noted.reason == f"pull request #{job.pr_number} merged by {MAINTAINER}"
    assert f"merged by {MAINTAINER}" in httpx.get(f"{svc.url}/jobs/1").text
    for p, words in ((_pull_request("closed", 999, branch), "no kernelsmith job published #999"),
                     (_pull_request("closed", job.pr_number, branch, head_repo="fork/Hello-World"),
                      "is not a kernelsmith pull request"),
                     (_pull_request("synchronize", job.pr_number, branch), "pull_request synchronize: nothing to do")):
        d = handled(svc, svc.deliver("pull_request", p))
        assert d.state == "ignored" and words in d.outcome, d.outcome

    # renamed on GitHub, then back: the job, its publication and the stored repository follow the name
    renamed = {"action": "renamed", "changes": {"repository": {"name": {"from": "Hello-World"}}},
               "repository": payload("push/with-installation.payload.json")["repository"] | {
                   "full_name": "Codertocat/Hello-Kernels", "name": "Hello-Kernels"},
               "sender": {"login": MAINTAINER, "type": "User"}, "installation": {"id": INSTALLATION}}
    d = handled(svc, svc.deliver("repository", renamed))
    assert d.outcome == f"repository renamed: {REPO} is now Codertocat/Hello-Kernels (1 job(s) moved)"
    store = svc.db()
    try:
        assert store.get(1).repo == "Codertocat/Hello-Kernels" and store.repository(REPO) is None
        assert store.publication("Codertocat/Hello-Kernels", branch).pr_number == job.pr_number
    finally:
        store.close()
    back = copy.deepcopy(renamed)
    back["changes"]["repository"]["name"]["from"] = "Hello-Kernels"
    back["repository"].update(full_name=REPO, name="Hello-World")
    assert handled(svc, svc.deliver("repository", back)).state == "done"
    for action, words in (("archived", f"repository archived: {REPO} inactive"),
                          ("unarchived", f"repository unarchived: {REPO} active")):
        d = handled(svc, svc.deliver("repository", back | {"action": action}))
        assert d.state == "done" and d.outcome == words
    for p, words in ((renamed | {"action": "deleted"}, "Codertocat/Hello-Kernels is not a repository kernelsmith knows"),
                     (back | {"action": "transferred", "changes": {}}, "does not say the former name"),
                     (back | {"action": "publicized"}, "repository publicized: nothing to do")):
        d = handled(svc, svc.deliver("repository", p))
        assert d.state == "ignored" and words in d.outcome, d.outcome
    store = svc.db()
    try:
        assert store.get(1).repo == REPO and store.repository(REPO).active
        assert store.publication(REPO, branch).pr_number == job.pr_number
    finally:
        store.close()

    # the App suspended, then taken off: the stored repository follows, and work that could never publish stops
    svc.deliver("issue_comment", command("/kernelsmith optimize softmax --backend interpret --budget 40", stub))
    wait_for(lambda: (j := job_state(svc, 2)) and j.state == "evolving", what="job 2 to be searching")
    gone = payload("installation/deleted.payload.json")
    gone["installation"]["id"] = INSTALLATION
    del gone["repositories"]  # the repositories are known from the store
    for action, active in (("suspend", False), ("unsuspend", True), ("deleted", False)):
        gone["action"] = action
        d = handled(svc, svc.deliver("installation", gone))
        assert d.state == "done" and f"installation {INSTALLATION} {action}: 1 repositories" in d.outcome, d.outcome
        store = svc.db()
        try:
            assert store.repository(REPO).active is active
        finally:
            store.close()
        if action == "suspend":
            assert "cancelled job(s) [2]" in d.outcome
    job2 = finished(svc, 2)
    assert job2.state == "cancelled" and job2.done_count < 40
    no_crash(svc)


def test_the_inbox_outlives_a_store_that_fails_and_payloads_stored_by_older_versions(tmp_path, stub, remote, app_key):
    """In process, on a real SQLite store: a delivery that cannot be recorded stays pending and the inbox goes on
    (the thread died before, and nothing was handled again until a restart); a payload an older version stored
    that is not one JSON object is ignored as malformed."""
    from bot.app.events import EventProcessor
    from bot.app.service import build_context
    from bot.app.settings import Settings

    ctx = build_context(Settings(webhook_secret=b"s", app_id=APP_ID, private_key=app_key[0],
                                 data_dir=tmp_path / "data", github_api_url=stub.url, git_url=remote.url_template,
                                 github_throttle=False))
    store, real = ctx.store, ctx.store.finish_delivery
    calls = []

    def busy_once(*args, **kwargs):  # the first write meets a database that stays locked past its timeout
        calls.append(args[:2])
        if len(calls) == 1:
            from sqlalchemy.exc import OperationalError

            raise OperationalError("UPDATE deliveries", {}, Exception("database is locked"))
        return real(*args, **kwargs)

    store.finish_delivery = busy_once
    ping = (HOOKS / "ping/payload.json").read_text()
    for delivery, event, body in (("d-1", "ping", ping), ("d-2", "ping", "[1, 2]"), ("d-3", "push", "not json"),
                                  ("d-4", "ping", ping)):
        assert store.add_delivery(delivery, event, None, body)
    inbox = EventProcessor(ctx, poll=0.05)
    inbox.start()
    try:
        wait_for(lambda: store.pending_deliveries() == 0, what="the inbox to go on")
        assert inbox._thread.is_alive()
    finally:
        inbox.stop()
        store.close()
    got = [(d, store.delivery(d).state, store.delivery(d).outcome.split(":")[0]) for d in ("d-1", "d-2", "d-3", "d-4")]
    assert got == [("d-1", "done", "pong (zen"), ("d-2", "ignored", "malformed ping payload"),
                   ("d-3", "ignored", "malformed push payload"), ("d-4", "done", "pong (zen")]
    assert calls[:2] == [("d-1", "done"), ("d-1", "done")]  # recorded on the second try, never as failed
