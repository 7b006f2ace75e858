"""The stand-in's pull-request routes: list by head, create (one open PR per head), read, edit, label."""
from __future__ import annotations

import copy

from .recordings import recorded

API = "https://api.github.com"


def check_fields(body: dict | None, recorded_body: dict | None) -> None:
    """A request body may only use fields that GitHub's recorded request for that call used."""
    extra = set(body or {}) - set(recorded_body or {})
    if extra:
        raise AssertionError(f"request fields GitHub's recording never used: {sorted(extra)}")


class PullRoutes:
    """Mixed into GitHubStub: uses its lock, pulls, _numbers, _git and _error."""

    def _pull_body(self, full: str, pr: dict) -> dict:
        body = copy.deepcopy(recorded("Repository.testCreatePull", "POST").response_body)
        n = pr["number"]
        body.update(number=n, title=pr["title"], body=pr["body"], state=pr["state"], draft=pr["draft"],
                    url=f"{API}/repos/{full}/pulls/{n}", html_url=f"https://github.com/{full}/pull/{n}",
                    issue_url=f"{API}/repos/{full}/issues/{n}", labels=[{"name": x} for x in pr["labels"]])
        body["head"].update(ref=pr["head"], label=f"{full.split('/')[0]}:{pr['head']}")
        body["head"]["repo"].update(full_name=full, url=f"{API}/repos/{full}")
        body["base"].update(ref=pr["base"])
        body["base"]["repo"].update(full_name=full, url=f"{API}/repos/{full}")
        return body

    def list_pulls(self, req, owner, name):
        full = f"{owner}/{name}"
        state, head = req.query.get("state", "open"), req.query.get("head")
        with self.lock:
            prs = [p for p in self.pulls.values() if p["repo"] == full and (state == "all" or p["state"] == state)
                   and (head is None or f"{owner}:{p['head']}" == head)]
        return 200, {}, [self._pull_body(full, p) for p in prs]

    def create_pull(self, req, owner, name):
        full = f"{owner}/{name}"
        check_fields(req.body, recorded("Repository.testCreatePull", "POST").request_body)
        head = req.body["head"].split(":")[-1]
        if self._git(full, "rev-parse", "--verify", f"refs/heads/{head}") is None:
            return self._error(422, "Validation Failed")
        with self.lock:
            if any(p["repo"] == full and p["head"] == head and p["state"] == "open" for p in self.pulls.values()):
                return self._error(422, f"A pull request already exists for {owner}:{head}.")
            n = next(self._numbers)
            self.pulls[n] = {"repo": full, "number": n, "title": req.body["title"], "body": req.body.get("body"),
                             "head": head, "base": req.body["base"], "draft": bool(req.body.get("draft")),
                             "state": "open", "labels": [], "edits": 0}
            return 201, {}, self._pull_body(full, self.pulls[n])

    def get_pull(self, req, owner, name, number):
        pr = self.pulls.get(int(number))
        return (200, {}, self._pull_body(f"{owner}/{name}", pr)) if pr else self._error(404)

    def edit_pull(self, req, owner, name, number):
        check_fields(req.body, recorded("PullRequest.testEditWithAllArguments", "PATCH").request_body)
        with self.lock:
            pr = self.pulls.get(int(number))
            if pr is None:
                return self._error(404)
            pr.update({k: v for k, v in req.body.items() if k in ("title", "body", "state")})
            pr["edits"] += 1
            return 200, {}, self._pull_body(f"{owner}/{name}", pr)

    def add_labels(self, req, owner, name, number):
        with self.lock:
            pr = self.pulls.get(int(number))
            if pr is None:
                return self._error(404)
            labels = req.body if isinstance(req.body, list) else req.body.get("labels", [])
            pr["labels"] += [x for x in labels if x not in pr["labels"]]
            return 200, {}, [{"name": x, "url": f"{API}/repos/{owner}/{name}/labels/{x}"} for x in pr["labels"]]

