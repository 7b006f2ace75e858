"""A restart mid-job loses nothing: the running job is resumed (same status comment), the queued one runs;
then `/kernelsmith cancel` stops a running job and kills its worker."""
from .conftest import command, job_state, settled_status, wait_for
from .test_commands import handled
from .test_comment_to_pr import finished


def test_restart_mid_job(serve, stub, remote):
    svc = serve("app.pipelines:slow")
    svc.deliver("issue_comment", command("/kernelsmith optimize rms_norm --backend interpret --budget 16", stub))
    svc.deliver("issue_comment", command("/kernelsmith optimize softmax --backend interpret --budget 2", stub))
    wait_for(lambda: (j := job_state(svc, 1)) and j.state == "evolving" and j.done_count >= 2,
             what="job 1 to be searching")
    assert job_state(svc, 2).state == "queued"  # one job at a time per repository
    again = handled(svc, svc.deliver("issue_comment", command("/kernelsmith optimize rms_norm softmax", stub)))
    assert again.outcome == "already running: ['rms_norm', 'softmax']"  # no twin of an active job
    assert "already queued or running: `rms_norm` on `interpret` (job 1), `softmax` on `interpret` (job 2)" \
        in stub.comments_on(1)[-1].body
    svc.kill()  # SIGKILL: no shutdown code runs
    cut = job_state(svc, 1)
    assert cut.state == "evolving"

    svc2 = serve("app.pipelines:slow")  # the same data folder and SQLite file, a new process
    first, second = finished(svc2, 1), finished(svc2, 2)
    assert first.state == "done" and first.attempts == 2 and first.pr_number
    assert "resumed: the service restarted during stage search" in first.reason
    assert second.state == "done" and second.attempts == 1
    status = settled_status(stub, first)  # the same comment, edited on by the new process
    history = "\n".join(status.history)
    resumed = history.index("↻ resumed: the service restarted during stage search")
    assert history.index("**evaluating 2/16**") < resumed < history.rindex("**evaluating 1/16**") \
        < history.index("**done**")
    assert len([c for c in stub.comments_on(1) if c.body.startswith("<!-- kernelsmith:job:")]) == 2  # one a job

    # `/kernelsmith cancel` stops a running job and kills its worker.
    svc2.deliver("issue_comment", command("/kernelsmith optimize silu_and_mul --backend interpret --budget 50", stub))
    wait_for(lambda: (j := job_state(svc2, 3)) and j.state == "evolving" and j.done_count >= 1)
    svc2.deliver("issue_comment", command("/kernelsmith cancel", stub))
    job = finished(svc2, 3)
    assert job.state == "cancelled" and "cancelled during stage search" in job.reason
    assert job.done_count < 50 and len(stub.pulls) == 2
    # the state is recorded before the status comment is edited (hooks.finished): wait for the edit
    wait_for(lambda: "**cancelled**" in stub.comments[job.status_comment_id].body, what="the cancelled status")
    assert any("cancelling 1 job(s): 3" in c.body for c in stub.comments_on(1))
