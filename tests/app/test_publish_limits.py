"""Publishing within the repository's limits: the open-PR limit from the config gets a comment instead of a
second pull request, and a `no_improvement` result is a comment, never a pull request."""
from .conftest import command
from .test_comment_to_pr import finished, with_app_settings


def test_open_pr_limit_and_no_improvement(serve, stub, remote):
    with_app_settings(remote, open_pull_requests_limit=1)
    svc = serve("app.pipelines:by_kernel")
    svc.deliver("issue_comment", command("/kernelsmith optimize rms_norm silu_and_mul softmax --backend interpret "
                                         "--budget 2", stub))
    first, second, third = finished(svc, 1), finished(svc, 2), finished(svc, 3)
    assert (first.kernel, second.kernel, third.kernel) == ("rms_norm", "silu_and_mul", "softmax")

    assert first.state == "done" and first.pr_number
    assert second.state == "done" and second.pr_number is None and "open-PR" not in second.reason
    assert "1 open kernelsmith pull requests, the limit is 1" in second.reason
    assert any("the limit set by `open_pull_requests_limit`" in c.body and "silu_and_mul" in c.body
               for c in stub.comments_on(1))
    assert remote.sha("refs/heads/kernelsmith/silu_and_mul-interpret") is None  # nothing pushed

    assert third.state == "no_gain" and third.verdict == "no_improvement" and third.pr_number is None
    body = stub.comments[third.status_comment_id].body
    assert "**done, no pull request**" in body and "No candidate beat the baseline" in body
    assert remote.sha("refs/heads/kernelsmith/softmax-interpret") is None
    assert [p["head"] for p in stub.pulls.values()] == ["kernelsmith/rms_norm-interpret"]
