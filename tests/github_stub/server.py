"""The stand-in server: real HTTP on 127.0.0.1, answers shaped like GitHub's recorded answers, state kept
in memory, git contents read from bare repositories on disk. Faults (403, 404, 422, rate limits) are
injected per route; every request is logged for the tests to read."""
from __future__ import annotations

import base64
import copy
import datetime as dt
import itertools
import json
import re
import secrets
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import jwt

from .pulls import API, PullRoutes, check_fields
from .recordings import recorded

@dataclass
class Request:
    method: str
    path: str
    query: dict
    body: dict | None
    auth: str


@dataclass
class Fault:
    method: str
    pattern: str
    status: int | str  # 403 | 404 | 422 | 500 | "rate"
    times: int = 1


@dataclass
class Comment:
    id: int
    issue: int
    body: str
    user: str
    history: list[str] = field(default_factory=list)
    reactions: list[str] = field(default_factory=list)


def _errors() -> dict:
    return {
        401: recorded("Exceptions.testBadAuthentication", "GET").response_body,
        404: recorded("Exceptions.testUnknownObject", "GET", "Xxx").response_body,
        422: recorded("Exceptions.testInvalidInput", "POST").response_body,
        403: {"message": "Resource not accessible by integration",
              "documentation_url": "https://docs.github.com/rest"},
        500: {"message": "Server Error"},
    }


class GitHubStub(PullRoutes):
    def __init__(self, git_root: Path, app_id: int, public_key: str, token_ttl: int = 3600):
        self.git_root, self.app_id, self.public_key, self.token_ttl = Path(git_root), app_id, public_key, token_ttl
        self.lock = threading.RLock()
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.violations: list[str] = []
        self.tokens: dict[str, float] = {}
        self.permissions: dict[str, str] = {}
        self.comments: dict[int, Comment] = {}
        self.commit_comments: list[dict] = []
        self.pulls: dict[int, dict] = {}
        self.installations: dict[str, int] = {}
        self._ids = itertools.count(900001)
        self._numbers = itertools.count(101)
        self._errors = _errors()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- set-up used by the tests -------------------------------------------------------------------------
    def start(self) -> GitHubStub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add_repo(self, full_name: str, installation_id: int) -> None:
        self.installations[full_name] = installation_id

    def add_comment(self, issue: int, body: str, user: str, cid: int | None = None) -> int:
        with self.lock:
            cid = cid or next(self._ids)
            self.comments[cid] = Comment(cid, issue, body, user)
            return cid

    def fail(self, method: str, pattern: str, status: int | str, times: int = 1) -> None:
        with self.lock:
            self.faults.append(Fault(method, pattern, status, times))

    def comments_on(self, issue: int) -> list[Comment]:
        with self.lock:
            return [c for c in self.comments.values() if c.issue == issue]

    def calls(self, method: str, pattern: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    # --- plumbing -------------------------------------------------------------------------------------------
    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                url = urlparse(self.path)
                req = Request(self.command, url.path, {k: v[0] for k, v in parse_qs(url.query).items()},
                              json.loads(raw) if raw else None, self.headers.get("authorization", ""))
                with stub.lock:
                    stub.requests.append(req)
                status, headers, body = stub.dispatch(req)
                data = json.dumps(stub._rebase(body)).encode() if body is not None else b""
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=utf-8")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        return Handler

    def _rebase(self, body):
        return json.loads(json.dumps(body).replace(API, self.url))

    def _git(self, repo: str, *args: str) -> str | None:
        proc = subprocess.run(["git", "--git-dir", str(self.git_root / f"{repo}.git"), *args], capture_output=True,
                              text=True, check=False)
        return proc.stdout if proc.returncode == 0 else None

    def _error(self, status: int, message: str | None = None, headers: dict | None = None):
        body = copy.deepcopy(self._errors[status])
        if message:
            body["message"] = message
        return status, headers or {}, body

    def _fault(self, req: Request):
        with self.lock:
            for f in self.faults:
                if f.times > 0 and f.method == req.method and re.search(f.pattern, req.path):
                    f.times -= 1
                    if f.status == "rate":
                        reset = int(time.time()) + 2
                        return self._error(403, "API rate limit exceeded for installation ID 1.",
                                           {"x-ratelimit-remaining": "0", "x-ratelimit-limit": "5000",
                                            "x-ratelimit-reset": str(reset)})
                    return self._error(int(f.status))
        return None

    def _auth(self, req: Request):
        if req.path.startswith("/app/") or req.path.endswith("/installation"):
            if not req.auth.startswith("Bearer "):
                return self._error(401)
            try:
                claims = jwt.decode(req.auth[7:], self.public_key, algorithms=["RS256"])
            except jwt.ExpiredSignatureError:
                ex = recorded("GithubIntegration.testGetAccessTokenWithExpiredJWT", "POST")
                return ex.status, {}, ex.response_body
            except jwt.InvalidTokenError:
                return self._error(401)
            if str(claims.get("iss")) != str(self.app_id):
                return self._error(401)
            return None
        token = req.auth.removeprefix("token ").removeprefix("Bearer ")
        with self.lock:
            expires = self.tokens.get(token)
        if expires is None or expires < time.time():
            return self._error(401)
        return None

    def dispatch(self, req: Request):
        denied = self._auth(req)
        if denied:
            return denied
        fault = self._fault(req)
        if fault:
            return fault
        for method, pattern, handler in ROUTES:
            m = re.fullmatch(pattern, req.path)
            if m and method == req.method:
                try:
                    return handler(self, req, *m.groups())
                except AssertionError as exc:  # the bot sent what GitHub never received in the recordings
                    with self.lock:
                        self.violations.append(f"{req.method} {req.path}: {exc}")
                    return self._error(422, f"stand-in: {exc}")
        with self.lock:
            self.violations.append(f"{req.method} {req.path}: no such route in the recordings")
        return self._error(404)

    # --- routes ---------------------------------------------------------------------------------------------
    def repo_installation(self, req, owner, name):
        full = f"{owner}/{name}"
        if full not in self.installations:
            return self._error(404)
        body = copy.deepcopy(recorded("GithubIntegration.testGetRepoInstallation", "GET").response_body)
        body["id"] = self.installations[full]
        body["app_id"] = self.app_id
        return 200, {}, body

    def access_token(self, req, inst):
        if int(inst) not in self.installations.values():
            return self._error(404)
        ex = recorded("GithubIntegration.testGetAccessToken", "POST")
        check_fields(req.body, ex.request_body)
        body = copy.deepcopy(ex.response_body)
        token = "ghs_" + secrets.token_hex(18)
        expires = time.time() + self.token_ttl
        with self.lock:
            self.tokens[token] = expires
        body["token"] = token
        body["expires_at"] = dt.datetime.fromtimestamp(expires, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return 201, {}, body

    def get_repo(self, req, owner, name):
        full = f"{owner}/{name}"
        if full not in self.installations:
            return self._error(404)
        body = copy.deepcopy(recorded("Repository.setUp", "GET").response_body)
        head = self._git(full, "symbolic-ref", "HEAD") or "refs/heads/main"
        body.update(full_name=full, name=name, default_branch=head.strip().removeprefix("refs/heads/"),
                    url=f"{API}/repos/{full}", html_url=f"https://github.com/{full}")
        body["owner"]["login"] = owner
        return 200, {}, body

    def permission(self, req, owner, name, login):
        body = copy.deepcopy(recorded("Repository.testCollaboratorPermission", "GET").response_body)
        level = self.permissions.get(login, "read")
        body["permission"] = level
        body["role_name"] = level
        body["user"]["login"] = login
        return 200, {}, body

    def _issue_comment_body(self, full: str, c: Comment) -> dict:
        body = copy.deepcopy(recorded("Issue.testCreateComment", "POST").response_body)
        body.update(id=c.id, body=c.body, url=f"{API}/repos/{full}/issues/comments/{c.id}",
                    html_url=f"https://github.com/{full}/issues/{c.issue}#issuecomment-{c.id}",
                    issue_url=f"{API}/repos/{full}/issues/{c.issue}")
        body["user"]["login"] = c.user
        return body

    def get_issue(self, req, owner, name, number):
        full = f"{owner}/{name}"
        body = copy.deepcopy(recorded("Issue.setUp", "GET").response_body)
        body.update(number=int(number), url=f"{API}/repos/{full}/issues/{number}",
                    html_url=f"https://github.com/{full}/issues/{number}",
                    comments_url=f"{API}/repos/{full}/issues/{number}/comments",
                    repository_url=f"{API}/repos/{full}")
        return 200, {}, body

    def create_comment(self, req, owner, name, number):
        check_fields(req.body, recorded("Issue.testCreateComment", "POST").request_body)
        cid = self.add_comment(int(number), req.body["body"], "kernelsmith[bot]")
        with self.lock:
            self.comments[cid].history.append(req.body["body"])
        return 201, {}, self._issue_comment_body(f"{owner}/{name}", self.comments[cid])

    def get_comment(self, req, owner, name, cid):
        c = self.comments.get(int(cid))
        return (200, {}, self._issue_comment_body(f"{owner}/{name}", c)) if c else self._error(404)

    def edit_comment(self, req, owner, name, cid):
        check_fields(req.body, recorded("IssueComment.testEdit", "PATCH").request_body)
        with self.lock:
            c = self.comments.get(int(cid))
            if c is None:
                return self._error(404)
            c.body = req.body["body"]
            c.history.append(c.body)
        return 200, {}, self._issue_comment_body(f"{owner}/{name}", c)

    def react(self, req, owner, name, cid):
        ex = recorded("IssueComment.testCreateReaction", "POST")
        check_fields(req.body, ex.request_body)
        with self.lock:
            c = self.comments.get(int(cid))
            if c is None:
                return self._error(404)
            c.reactions.append(req.body["content"])
        body = copy.deepcopy(ex.response_body)
        body["content"] = req.body["content"]
        return 201, {}, body

    def get_contents(self, req, owner, name, path):
        full = f"{owner}/{name}"
        ref = req.query.get("ref", "HEAD")
        text = self._git(full, "show", f"{ref}:{path}")
        if text is None:
            return self._error(404)
        body = copy.deepcopy(recorded("Repository.testGetContents", "GET", "/contents/").response_body)
        body.update(path=path, name=Path(path).name, encoding="base64", size=len(text.encode()),
                    content=base64.b64encode(text.encode()).decode(), url=f"{API}/repos/{full}/contents/{path}")
        return 200, {}, body

    def get_branch(self, req, owner, name, branch):
        full = f"{owner}/{name}"
        sha = self._git(full, "rev-parse", "--verify", f"refs/heads/{branch}")
        if sha is None:
            return self._error(404, "Branch not found")
        body = copy.deepcopy(recorded("Repository.testGetBranch", "GET").response_body)
        body["name"] = branch
        body["commit"]["sha"] = sha.strip()
        body["commit"]["url"] = f"{API}/repos/{full}/commits/{sha.strip()}"
        return 200, {}, body

    def get_commit(self, req, owner, name, sha):
        full = f"{owner}/{name}"
        if self._git(full, "cat-file", "-e", f"{sha}^{{commit}}") is None:
            return self._error(404, "No commit found for SHA: " + sha)
        return 200, {}, {"sha": sha, "url": f"{API}/repos/{full}/commits/{sha}",
                         "html_url": f"https://github.com/{full}/commit/{sha}", "commit": {"message": ""},
                         "files": [], "parents": []}

    def commit_comment(self, req, owner, name, sha):
        full = f"{owner}/{name}"
        with self.lock:
            cid = next(self._ids)
            self.commit_comments.append({"sha": sha, "body": req.body["body"], "id": cid})
        return 201, {}, {"id": cid, "body": req.body["body"], "commit_id": sha,
                         "url": f"{API}/repos/{full}/comments/{cid}",
                         "html_url": f"https://github.com/{full}/commit/{sha}#commitcomment-{cid}",
                         "user": {"login": "kernelsmith[bot]", "type": "Bot"}}

    def rate_limit(self, req):
        return 200, {}, recorded("RateLimiting.testGetRateLimit", "GET").response_body


R = r"/repos/([^/]+)/([^/]+)"
ROUTES = [
    ("GET", R + r"/installation", GitHubStub.repo_installation),
    ("POST", r"/app/installations/(\d+)/access_tokens", GitHubStub.access_token),
    ("GET", R, GitHubStub.get_repo),
    ("GET", R + r"/collaborators/([^/]+)/permission", GitHubStub.permission),
    ("GET", R + r"/issues/(\d+)", GitHubStub.get_issue),
    ("POST", R + r"/issues/(\d+)/comments", GitHubStub.create_comment),
    ("GET", R + r"/issues/comments/(\d+)", GitHubStub.get_comment),
    ("PATCH", R + r"/issues/comments/(\d+)", GitHubStub.edit_comment),
    ("POST", R + r"/issues/comments/(\d+)/reactions", GitHubStub.react),
    ("GET", R + r"/contents/(.+)", GitHubStub.get_contents),
    ("GET", R + r"/branches/([^/]+)", GitHubStub.get_branch),
    ("GET", R + r"/commits/([0-9a-f]+)", GitHubStub.get_commit),
    ("POST", R + r"/commits/([0-9a-f]+)/comments", GitHubStub.commit_comment),
    ("GET", R + r"/pulls", PullRoutes.list_pulls),
    ("POST", R + r"/pulls", PullRoutes.create_pull),
    ("GET", R + r"/pulls/(\d+)", PullRoutes.get_pull),
    ("PATCH", R + r"/pulls/(\d+)", PullRoutes.edit_pull),
    ("POST", R + r"/issues/(\d+)/labels", PullRoutes.add_labels),
    ("GET", r"/rate_limit", GitHubStub.rate_limit),
]
