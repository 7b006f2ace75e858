"""GitHub answering 403, 404, 422 or a rate limit: each gives a clear, recorded outcome; work waiting on a
rate limit is retried, nothing is lost, and the service keeps serving."""
from pathlib import Path

from .conftest import MAINTAINER, command, wait_for
from .test_commands import handled
from .test_comment_to_pr import finished


def test_refusals_and_rate_limits(serve, stub, remote):
    svc = serve()

    # Rate limited on the reaction: the delivery waits for the reset and is handled in full afterwards.
    stub.fail("POST", r"/reactions$", "rate")
    stub.fail("POST", r"/pulls$", "rate")  # ...and again when the pull request is opened
    stub.fail("PATCH", r"/issues/comments/\d+$", 403, times=2)  # ...and refused twice editing the status
    p = command("/kernelsmith optimize rms_norm --backend interpret --budget 2", stub)
    r = svc.deliver("issue_comment", p)
    d = handled(svc, r)
    assert d.state == "done" and d.attempts == 2 and d.outcome == "queued job(s) [1]"
    assert stub.comments[p["comment"]["id"]].reactions == ["eyes"]
    job = finished(svc, 1)
    assert job.state == "done" and job.pr_number, job.reason
    assert len(stub.calls("POST", r"/pulls$")) == 2  # refused once (rate limit), then opened
    # the status edits went on after the 403s (the state is recorded before the status comment is edited: wait)
    wait_for(lambda: "**done**" in stub.comments[job.status_comment_id].body, what="the done status")

    # 422 when opening the pull request: the job fails with GitHub's reason; its report is kept.
    stub.fail("POST", r"/pulls$", 422)
    svc.deliver("issue_comment", command("/kernelsmith optimize silu_and_mul --backend interpret --budget 2", stub))
    job = finished(svc, 2)
    assert job.state == "failed" and "422" in job.reason and "invalid" in job.reason
    assert (Path(job.out_dir) / "report.json").is_file() and (Path(job.out_dir) / "report.md").is_file()
    wait_for(lambda: "**failed**" in stub.comments[job.status_comment_id].body, what="the failed status")
    assert "422" in stub.comments[job.status_comment_id].body

    # 404 for the comment (deleted before the bot looked): the delivery records it; no job.
    stub.fail("POST", r"/issues/comments/\d+/reactions$", 404)
    d = handled(svc, svc.deliver("issue_comment", command("/kernelsmith optimize rms_norm", stub)))
    assert d.state == "failed" and "404" in d.outcome

    # 403 on the permission check: recorded as a refusal, nothing started.
    stub.fail("GET", rf"/collaborators/{MAINTAINER}/permission$", 403)
    d = handled(svc, svc.deliver("issue_comment", command("/kernelsmith optimize rms_norm", stub)))
    assert d.state == "failed" and "403" in d.outcome and "permission" in d.outcome

    # Still serving: a plain help request is answered.
    d = handled(svc, svc.deliver("issue_comment", command("/kernelsmith help", stub)))
    assert d.state == "done"
    store = svc.db()
    try:
        assert len(store.jobs()) == 2
    finally:
        store.close()
    assert all(f.times == 0 for f in stub.faults)  # every injected refusal was met
