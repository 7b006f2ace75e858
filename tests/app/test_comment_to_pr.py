"""The whole path, for real: a signed issue_comment delivery to `kernelsmith serve`, the permission check, the
👀 reaction, one status comment edited in place, the job, the branch pushed to the bare remote, the pull
request opened; a second command updates the same pull request; a human push to the branch is respected."""
import json
import re
from pathlib import Path

import httpx
import yaml

from . import browser
from .conftest import MAINTAINER, REPO, command, job_state, settled_status, wait_for

BRANCH = "kernelsmith/rms_norm-interpret"
MODULE = "tinyserve/kernels/rms_norm.py"


def with_app_settings(remote, **keys) -> str:
    config = yaml.safe_load((remote.work / ".github/kernelsmith.yml").read_text())
    config.update(keys)
    return remote.commit("kernelsmith: app settings", {".github/kernelsmith.yml": yaml.safe_dump(config)})


def finished(svc, job_id, timeout=90):
    return wait_for(lambda: (j := job_state(svc, job_id)) and j.state in ("done", "no_gain", "failed", "cancelled")
                    and j, timeout=timeout, interval=0.25, what=f"job {job_id} to finish")


def test_comment_to_pull_request_update_and_human_push(serve, stub, remote, tmp_path):
    base = with_app_settings(remote, labels=["performance", "kernelsmith"], draft=True)
    svc = serve()
    p = command("Thanks!\n/kernelsmith optimize rms_norm --backend interpret --budget 4", stub)
    r = svc.deliver("issue_comment", p)
    assert r.status_code == 202 and r.json()["status"] == "queued"

    job = finished(svc, 1)
    assert job.state == "done", job.reason
    assert [s[0] for s in job.stages] == ["preflight", "bundle", "baseline", "search", "verify", "report"]
    assert job.commit == base and job.done_count == 4 and job.total_count == 4

    assert stub.comments[p["comment"]["id"]].reactions == ["eyes"]
    assert stub.calls("GET", rf"/repos/{REPO}/collaborators/{MAINTAINER}/permission")
    mine = [c for c in stub.comments_on(1) if c.user == "kernelsmith[bot]"]
    assert len(mine) == 1, [c.body for c in mine]  # one status comment, edited in place
    status = settled_status(stub, job)
    assert status.id == mine[0].id == job.status_comment_id
    history = "\n".join(status.history)
    for step in ("**queued**", "**evaluating 1/4**", "**evaluating 4/4**", "**verifying**", "**done**"):
        assert step in history, step
    assert history.index("**queued**") < history.index("**evaluating") < history.index("**verifying**") \
        < history.index("**done**")
    assert job.pr_url in status.body and "1.040x" in status.body  # the result, in the last edit

    [pr] = [p for p in stub.pulls.values()]
    assert pr["head"] == BRANCH and pr["base"] == "master" and pr["draft"] is True
    assert pr["labels"] == ["performance", "kernelsmith"]
    assert "Verdict: **improved**" in pr["body"] and p["comment"]["html_url"] in pr["body"]
    tip = remote.sha(f"refs/heads/{BRANCH}")
    assert "launch configuration chosen by job 1" in remote.show(tip, MODULE)
    assert remote.sha(f"{tip}^") == base  # one commit on top of the job's commit

    out = Path(job.out_dir)
    env = json.loads((out / "worker_env.json").read_text())
    assert not {"KS_PRIVATE_KEY", "KS_WEBHOOK_SECRET", "KS_GIT_TOKEN"} & set(env)
    assert json.loads((out / "report.json").read_text())["leaked_secrets"] == []

    # The job pages: the list, and the job's report with its chart drawn by the locally served Chart.js.
    index = httpx.get(svc.url + "/").text
    assert 'data-job="1" data-state="done"' in index
    shot = tmp_path / "job1.png"
    page = browser.render(f"{svc.url}/jobs/1", shot)
    assert 'data-chart-points="4"' in page  # set by the page's script after Chart.js built the chart
    assert re.search(r'<canvas id="speedup-chart"[^>]*style="[^"]*width: \d+px', page)  # sized by Chart.js
    assert "<table>" in page and "T=512" in page  # the report, rendered from markdown
    assert browser.count_color(shot, (31, 119, 180)) > 300  # the best-speedup line, in the chart's colour
    assert httpx.get(svc.url + "/static/chart.umd.min.js").text.startswith("/*!\n * Chart.js v4")

    # A second command: the same pull request is updated, never duplicated.
    svc.deliver("issue_comment", command("/kernelsmith optimize rms_norm --backend interpret --budget 3", stub))
    job2 = finished(svc, 2)
    assert job2.state == "done" and job2.pr_number == pr["number"], job2.reason
    assert len(stub.pulls) == 1 and pr["edits"] == 1
    assert "launch configuration chosen by job 2" in remote.show(f"refs/heads/{BRANCH}", MODULE)

    # A maintainer pushes to the branch: kernelsmith comments instead of force-pushing.
    human = remote.commit("hand-tuned block size", {"NOTES.md": "tuned by hand\n"}, branch=BRANCH)
    svc.deliver("issue_comment", command("/kernelsmith optimize rms_norm --backend interpret --budget 2", stub))
    job3 = finished(svc, 3)
    assert job3.state == "done" and "did not push" in job3.reason
    assert remote.sha(f"refs/heads/{BRANCH}") == human
    assert any("will not force-push" in c.body for c in stub.comments_on(pr["number"]))
    assert len(stub.pulls) == 1
    log = svc.log.read_text()
    assert "PRIVATE KEY" not in log and "ghs_" not in log  # neither the App's key nor a token was logged
