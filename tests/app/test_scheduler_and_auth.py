"""Scheduled scans against the bare remote and the stand-in (in-process), and the App's credentials:
installation tokens refreshed before expiry, an expired JWT refused, secrets kept out of reprs."""
import datetime as dt

import pytest
from github import GithubException

from bot.app.scheduler import Scanner
from bot.app.service import build_context
from bot.app.settings import Settings
from bot.github.auth import AppAuthority, AppCredentials
from bot.jobs.models import now

from .conftest import APP_ID, INSTALLATION, REPO
from .test_comment_to_pr import with_app_settings


@pytest.fixture
def ctx(tmp_path, stub, remote, app_key):
    settings = Settings(webhook_secret=b"s", app_id=APP_ID, private_key=app_key[0], data_dir=tmp_path / "data",
                        github_api_url=stub.url, git_url=remote.url_template, github_throttle=False)
    c = build_context(settings)
    c.store.upsert_repository(REPO, INSTALLATION)
    yield c
    c.store.close()


def test_scheduled_scans(ctx, remote):
    scanner = Scanner(ctx)
    t0 = now()
    assert scanner.scan_all(t0) == {REPO: "not due"}  # no `schedule:` in the config: no scans

    with_app_settings(remote, schedule={"interval": "daily"}, open_pull_requests_limit=2)
    first = scanner.scan_all(t0)[REPO]
    jobs = ctx.store.jobs()
    assert len(jobs) == 2 and "held back by limits" in first  # four kernels are new, the PR limit is 2
    assert {j.trigger for j in jobs} == {"schedule"} and {j.commit for j in jobs} == {remote.sha("master")}

    assert scanner.scan_all(t0 + dt.timedelta(hours=2))[REPO] == "not due"  # daily
    assert scanner.scan_all(t0 + dt.timedelta(days=1))[REPO] == "no change"

    kernel = remote.work / "tinyserve/kernels/rms_norm.py"
    remote.commit("rms_norm: comment", {"tinyserve/kernels/rms_norm.py": kernel.read_text() + "\n# tweak\n"})
    out = scanner.scan_all(t0 + dt.timedelta(days=2))[REPO]
    assert "changed ['rms_norm']" in out
    test = remote.work / "tests/test_activation.py"
    remote.commit("activation test: one more case", {"tests/test_activation.py": test.read_text() + "\n# more\n"})
    out = scanner.scan_all(t0 + dt.timedelta(days=3))[REPO]
    assert "changed ['silu_and_mul']" in out
    assert [j.kernel for j in ctx.store.jobs()][:2] == ["silu_and_mul", "rms_norm"]  # newest first
    assert len(ctx.store.jobs()) == 4


def test_installation_tokens_refresh_before_expiry(stub, app_key):
    stub.token_ttl = 400  # under the 5-minute margin after 100 s
    authority = AppAuthority(AppCredentials(APP_ID, app_key[0]), stub.url, throttle=False)
    t = dt.datetime.now(dt.timezone.utc)
    token = authority.token(INSTALLATION, t)
    assert authority.token(INSTALLATION, t + dt.timedelta(seconds=50)) == token and authority.minted == 1
    fresh = authority.token(INSTALLATION, t + dt.timedelta(seconds=150))
    assert fresh != token and authority.minted == 2
    assert authority.installation_id(REPO) == INSTALLATION
    assert app_key[0] not in repr(authority.creds) and token not in repr(authority)
    settings = Settings(webhook_secret=b"hush", app_id=APP_ID, private_key=app_key[0])
    assert "hush" not in repr(settings) and "PRIVATE" not in repr(settings)


def test_expired_app_jwt_is_refused(stub, app_key):
    import jwt
    from github import Auth, GithubIntegration

    def sign_expired(claims):  # the App's own key, but a JWT that ran out a minute ago
        return jwt.encode({**claims, "exp": claims["iat"] - 60}, app_key[0], algorithm="RS256")

    expired = Auth.AppAuth(APP_ID, sign_func=sign_expired)
    integration = GithubIntegration(auth=expired, base_url=stub.url, retry=None)
    with pytest.raises(GithubException) as err:
        integration.get_access_token(INSTALLATION)
    assert err.value.status == 401 and "expiration time" in str(err.value.data).lower()  # GitHub's recorded answer
