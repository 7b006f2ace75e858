"""Once, the App's default pipeline itself: `bot.optimize.optimize` on the example repository, in the
service's scrubbed worker, on the CPU interpreter. Its verdict (not_timed) is a comment, never a PR."""
from pathlib import Path

import httpx
import pytest

from .conftest import command, wait_for
from .test_comment_to_pr import finished


@pytest.mark.slow
def test_real_optimize_through_the_app(serve, stub, remote):
    svc = serve("bot.optimize:optimize")
    svc.deliver("issue_comment", command("/kernelsmith optimize rms_norm --backend interpret --budget 1", stub))
    job = finished(svc, 1, timeout=400)
    assert job.state == "no_gain" and job.verdict == "not_timed", job.reason
    assert [s[0] for s in job.stages][:3] == ["preflight", "bundle", "baseline"] and job.done_count == 1
    out = Path(job.out_dir)
    assert (out / "report.md").is_file() and (out / "bundle/task.yaml").is_file()
    # the final status edit follows the job's final state (the finished hook), so wait for it
    body = wait_for(lambda: "**done, no pull request**" in stub.comments[job.status_comment_id].body
                    and stub.comments[job.status_comment_id].body, timeout=30, what="the final status comment")
    assert "**done, no pull request**" in body and "correctness only" in body
    assert not stub.pulls and remote.sha("refs/heads/kernelsmith/rms_norm-interpret") is None
    page = httpx.get(f"{svc.url}/jobs/1").text
    assert 'id="no-chart"' in page and "checks correctness only" in page
