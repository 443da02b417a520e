"""``coderag grants-sync`` (issue 45: grants that follow the code host). Each host's recorded
answers (tests/fixtures/codehost, written from the hosts' documented example responses: no
network) become a grants file ``read_grants`` accepts: two teams over paginated listings, a login
with no coderag token left out, a repository registered nowhere reported, registrations by
https, ssh and ``.git`` URLs matched and look-alikes not; then the users and repository maps, a
base file's own entries kept, every refusal one line on stderr with exit 2 and nothing written,
``--dry-run`` writing nothing, and a real app whose answers follow two syncs without a restart."""

from __future__ import annotations

import argparse
import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import git
import httpx
import pytest
from fastapi.testclient import TestClient

from coderag.auth import Grants, read_grants
from coderag.settings import get_settings
from coderag.store import get_catalog, refs
from coderag_app import cli, code_hosts, grants_sync
from coderag_app.server import create_app
from tests.conftest import FIXTURES, commit_all

CODEHOST = FIXTURES / "codehost"
TOKENS = "root:root-token:admin,alice:alice-token:reader,bob:bob-token:reader,carol:c-token:reader"
TOKEN = {"github": "ghp_test0001", "gitlab": "glpat-test0002", "gitea": "gitea-test0003"}
AUTH = {
    "github": ("authorization", f"Bearer {TOKEN['github']}"),
    "gitlab": ("private-token", TOKEN["gitlab"]),
    "gitea": ("authorization", f"token {TOKEN['gitea']}"),
}
"""The header each host's token travels in."""

HOSTS = code_hosts.HOSTS
SERVER = {"github": "github.com", "gitlab": "gitlab.example.com", "gitea": "gitea.example.com"}
API_URL = {
    "github": [],  # the default, https://api.github.com
    "gitlab": ["--api-url", "https://gitlab.example.com/api/v4"],
    "gitea": ["--api-url", "https://gitea.example.com"],  # /api/v1 is added
}
PATHS = {
    "github": {"alpha": "acme/alpha", "bravo": "acme/bravo", "ledger": "acme/ledger"},
    "gitlab": {
        "alpha": "acme/backend/alpha",
        "bravo": "acme/web/bravo",
        "ledger": "acme/backend/ledger",
    },
    "gitea": {"alpha": "acme/alpha", "bravo": "acme/bravo", "ledger": "acme/ledger"},
}
"""Each recorded repository's path on the host (GitLab's projects live in the subgroups)."""


class Recorded:
    """A host's recorded answers, served by an ``httpx.MockTransport``: a request it has no
    recording for, or one without the host's token header, fails the test."""

    def __init__(self, host: str, index: str = "index.json") -> None:
        self.host = host
        data = json.loads((CODEHOST / host / index).read_text())
        self.api = httpx.URL(data["api_url"])
        self.answers = {
            (r["path"], frozenset(r.get("query", {}).items())): r for r in data["requests"]
        }
        self.used: list[tuple[str, frozenset[tuple[str, str]]]] = []
        self.unexpected: list[str] = []

    def transport(self) -> httpx.MockTransport:
        """The transport the sync's client is given."""
        return httpx.MockTransport(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode().split("?")[0]
        key = (path, frozenset(parse_qsl(request.url.query.decode())))
        header, value = AUTH[self.host]
        if (
            key not in self.answers
            or request.url.host != self.api.host
            or request.headers.get(header) != value
        ):
            self.unexpected.append(str(request.url))
            pytest.fail(f"no recording for {request.method} {request.url} with its token")
        self.used.append(key)
        recorded = self.answers[key]
        body = recorded["body"]
        if isinstance(body, str):
            body = json.loads((CODEHOST / self.host / body).read_text())
        headers = {"content-type": "application/json", **recorded.get("headers", {})}
        return httpx.Response(recorded.get("status", 200), headers=headers, json=body)

    def all_used(self) -> bool:
        """Whether every recording was asked for exactly once and nothing else was."""
        once = len(self.used) == len(set(self.used))
        return once and set(self.used) == set(self.answers) and not self.unexpected


def _args(*argv: str) -> argparse.Namespace:
    """The arguments as the real ``coderag`` parser reads them."""
    return cli.build_parser().parse_args(["grants-sync", *argv])


Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run the command with a transport; (exit status, stdout, stderr)."""

    def call(transport: httpx.BaseTransport | None, *argv: str) -> tuple[int, str, str]:
        code = grants_sync.run(_args(*argv), transport=transport)
        out, err = capsys.readouterr()
        return code, out, err

    return call


@pytest.fixture(autouse=True)
def tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """coderag's tokens and each host's token, as a cron job's environment has them."""
    monkeypatch.setenv("CODERAG_API_TOKENS", TOKENS)
    monkeypatch.delenv("CODERAG_GRANTS", raising=False)
    for host, env in code_hosts.DEFAULT_TOKEN_ENV.items():
        monkeypatch.setenv(env, TOKEN[host])
    get_settings.cache_clear()


def _register(host: str, tmp_path: Path) -> None:
    """Repositories registered in the real catalog by URL in every form that names a recorded
    repository, look-alikes that do not, a local repository and a ref."""
    server, paths = SERVER[host], PATHS[host]
    catalog = get_catalog()
    alpha, bravo = paths["alpha"], paths["bravo"]
    for name, url in [
        ("alpha", f"https://{server}/{alpha}.git"),
        ("alpha-mirror", f"https://deploy@{server.upper()}/{alpha.title()}/"),
        ("bravo", f"git@{server}:{bravo}.git"),
        ("bravo-ssh", f"ssh://git@{server}:22/{bravo}"),
        ("other-alpha", f"https://{server}/other/alpha.git"),
        ("alpha-elsewhere", f"https://elsewhere.example.com/{alpha}.git"),
        ("alphabet", f"https://{server}/{alpha}bet.git"),
    ]:
        catalog.create_repo(name, None, url, None)
    refs.add(catalog, "alpha", "release")  # its row's name holds '@', which no grant may
    local = tmp_path / "ledger-checkout"
    local.mkdir()
    (local / "ledger.py").write_text("TOTAL = 0\n")
    commit_all(git.Repo.init(local), "ledger")
    catalog.create_repo("ledger", str(local), None, None)


def _name_map(host: str, tmp_path: Path) -> Path:
    path = tmp_path / "names.toml"
    ledger = PATHS[host]["ledger"]
    # logins and repository paths are matched whatever their case: GitHub's login is "OctoCat"
    path.write_text(f'[users]\nOCTOCAT = "alice"\n\n[repos]\n"{ledger.upper()}" = "ledger"\n')
    return path


def _expected(host: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(groups, grants) a sync of the recorded teams writes."""
    groups = {f"{host}:acme/backend": ["alice", "bob"], f"{host}:acme/web": ["bob"]}
    grants = {
        f"{host}:acme/backend": ["alpha", "alpha-mirror", "ledger"],
        f"{host}:acme/web": ["bravo", "bravo-ssh"],
    }
    if host == "gitlab":  # the top group is a team too; its only member has no token
        groups["gitlab:acme"], grants["gitlab:acme"] = [], []
    return groups, grants


def _grants(groups: dict[str, list[str]], grants: dict[str, list[str]]) -> Grants:
    return Grants(
        {k: frozenset(v) for k, v in groups.items()}, {k: tuple(v) for k, v in grants.items()}
    )


@pytest.mark.parametrize("host", HOSTS)
def test_each_host_end_to_end(host: str, tmp_path: Path, run: Run) -> None:
    _register(host, tmp_path)
    out = tmp_path / "grants.toml"
    recorded = Recorded(host)
    args = ["--host", host, "--org", "acme", *API_URL[host], "--out", str(out)]
    code, stdout, err = run(
        recorded.transport(), *args, "--users", str(_name_map(host, tmp_path)), "--json"
    )
    assert (code, err) == (0, ""), err
    assert recorded.all_used(), (recorded.used, recorded.unexpected)  # both pages of each
    assert read_grants(out) == _grants(*_expected(host))
    report = json.loads(stdout)
    teams = {t["group"]: t for t in report["teams"]}
    backend, web = teams[f"{host}:acme/backend"], teams[f"{host}:acme/web"]
    owner = ["dora"] if host == "gitlab" else []  # inherited from the top group
    assert backend["without_user"] == owner
    assert web["without_user"] == sorted([*owner, "mallory"])  # eve is blocked: not a reader
    assert backend["unregistered"] == [PATHS[host]["alpha"].replace("alpha", "ghost")]
    assert web["unregistered"] == []
    assert report["written"] is True and report["out"] == str(out)
    assert out.stat().st_mode & 0o777 == 0o644  # the server may run as another user


def test_the_report_and_what_is_left_out_unmapped(tmp_path: Path, run: Run) -> None:
    _register("github", tmp_path)
    out = tmp_path / "grants.toml"
    names = tmp_path / "names.toml"
    names.write_text('[repos]\n"acme/ghost" = "ghost"\n')  # a name registered nowhere
    argv = ["--host=github", "--org=acme", "--out", str(out), "--users", str(names)]
    code, stdout, _ = run(Recorded("github").transport(), *argv)
    assert code == 0
    grants = read_grants(out)
    # octocat is no coderag user without the users map, the local ledger no URL's repository
    assert grants.groups["github:acme/backend"] == frozenset({"bob"})
    assert grants.patterns["github:acme/backend"] == ("alpha", "alpha-mirror")
    assert "no coderag token, not granted: OctoCat" in stdout
    assert "not registered in coderag: acme/ghost, acme/ledger" in stdout
    assert "github:acme/web: users bob; repositories bravo, bravo-ssh" in stdout
    assert f"wrote {out}" in stdout


BASE = """
[groups]
payments = ["alice", "carol"]
"github:acme/old-team" = ["carol"]
"github:other/x" = ["carol"]

[grants]
payments = ["ledger-*"]
"*" = ["handbook"]
"github:acme/old-team" = ["bravo"]
"github:acme" = ["alpha"]
"github:acmex/y" = ["alpha"]
"github:other/x" = ["alpha"]
"""


def test_the_base_files_own_entries_survive_and_a_second_sync_rewrites_nothing(
    tmp_path: Path, run: Run
) -> None:
    _register("github", tmp_path)
    base, out = tmp_path / "grants.base.toml", tmp_path / "grants.toml"
    base.write_text(BASE)
    argv = ["--host", "github", "--org", "acme", "--base", str(base), "--out", str(out)]
    argv += ["--users", str(_name_map("github", tmp_path))]
    code, stdout, _ = run(Recorded("github").transport(), *argv)
    assert code == 0 and "kept 4 entries" in stdout
    groups, grants = _expected("github")
    groups |= {"payments": ["alice", "carol"], "github:other/x": ["carol"]}
    grants |= {
        "payments": ["ledger-*"],
        "*": ["handbook"],
        "github:acmex/y": ["alpha"],  # another organization, however alike its name
        "github:other/x": ["alpha"],
    }
    # the earlier sync's old-team and the organization's own key are the sync's: gone
    assert read_grants(out) == _grants(groups, grants)
    assert base.read_text() == BASE
    before = out.stat()
    code, stdout, _ = run(Recorded("github").transport(), *argv)
    assert code == 0 and "already says this: left as it was" in stdout
    after = out.stat()  # the server's reload sees no change
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_dry_run_prints_the_file_and_writes_nothing(tmp_path: Path, run: Run) -> None:
    _register("gitea", tmp_path)
    out, fresh = tmp_path / "grants.toml", tmp_path / "new.json"
    out.write_text("[grants]\ncarol = ['handbook']\n")
    before = out.stat()
    argv = ["--host", "gitea", "--org", "acme", *API_URL["gitea"], "--dry-run"]
    code, stdout, _ = run(Recorded("gitea").transport(), *argv, "--out", str(out))
    assert code == 0
    assert '"gitea:acme/web" = ["bravo", "bravo-ssh"]' in stdout
    assert f"dry run: nothing written to {out}" in stdout
    assert out.read_text() == "[grants]\ncarol = ['handbook']\n"
    assert (out.stat().st_ino, out.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    code, stdout, _ = run(Recorded("gitea").transport(), *argv, "--out", str(fresh), "--json")
    report = json.loads(stdout)
    assert code == 0 and report["dry_run"] is True and report["written"] is None
    assert json.loads(report["file"])["grants"]["gitea:acme/web"] == ["bravo", "bravo-ssh"]
    assert not fresh.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".grants-sync")) == []


def test_a_json_grants_file(tmp_path: Path, run: Run) -> None:
    _register("gitlab", tmp_path)
    out = tmp_path / "grants.json"
    argv = ["--host", "gitlab", "--org", "acme", *API_URL["gitlab"], "--out", str(out)]
    code, _, _ = run(
        Recorded("gitlab").transport(), *argv, "--users", str(_name_map("gitlab", tmp_path))
    )
    assert code == 0
    assert read_grants(out) == _grants(*_expected("gitlab"))
    assert json.loads(out.read_text())["groups"]["gitlab:acme/web"] == ["bob"]


def test_the_file_is_checked_then_renamed_into_place(tmp_path: Path) -> None:
    path = tmp_path / "grants.toml"
    path.write_text("[grants]\nbob = ['alpha']\n")
    first = path.stat().st_ino
    with pytest.raises(code_hosts.SyncError, match=r"nothing was written.*its refs come with it"):
        grants_sync.write_grants(path, "[grants]\nbob = ['alpha@release']\n")
    assert path.read_text() == "[grants]\nbob = ['alpha']\n" and path.stat().st_ino == first
    assert grants_sync.write_grants(path, "[grants]\nbob = ['bravo']\n")
    assert read_grants(path).patterns == {"bob": ("bravo",)}
    assert path.stat().st_ino != first  # a new file renamed over the old one
    assert [p.name for p in tmp_path.iterdir()] == ["grants.toml"]  # no temporary file left


def test_a_file_the_server_would_refuse_is_neither_written_nor_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Run
) -> None:
    out = tmp_path / "grants.toml"
    out.write_text("[grants]\n")
    monkeypatch.setattr(grants_sync, "render", lambda *a: "[grants]\nbob = ['alpha@main']\n")
    argv = ["--host", "github", "--org", "acme", "--out", str(out)]
    for extra in ([], ["--dry-run"]):
        code, stdout, err = run(Recorded("github").transport(), *argv, *extra)
        assert code == 2 and stdout == "" and "would be refused, nothing was written" in err
    assert out.read_text() == "[grants]\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".grants-sync")]


def _answer(
    status: int = 200, headers: dict[str, str] | None = None, body: Any = None, text: str = ""
) -> httpx.MockTransport:
    """A host that answers every request so."""

    def reply(request: httpx.Request) -> httpx.Response:
        if body is not None:
            return httpx.Response(status, headers=headers, json=body)
        return httpx.Response(status, headers=headers, text=text)

    return httpx.MockTransport(reply)


def _raising(exc: type[httpx.TransportError]) -> httpx.MockTransport:
    def reply(request: httpx.Request) -> httpx.Response:
        raise exc("no route", request=request)

    return httpx.MockTransport(reply)


RESET = "1767225600"  # 2026-01-01 00:00:00 UTC

GITHUB_403 = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": RESET}
GITLAB_429 = {"RateLimit-Remaining": "0", "RateLimit-Reset": RESET}
MOVED = "https://api.github.com/organizations/9919/teams"

REFUSALS = [
    ("github", _answer(401, body={}), "github refused the token in ACME_TOKEN (401"),
    ("gitlab", _answer(401, body={}), "gitlab refused the token in ACME_TOKEN (401"),
    (
        "github",
        _answer(403, body={"message": "Must have admin rights"}),
        "does not let the token in ACME_TOKEN read /orgs/acme/teams (403): it needs the read:org",
    ),
    (
        "github",
        _answer(404, body={"message": "Not Found"}),
        "github has no organization 'acme' the token in ACME_TOKEN can see (404",
    ),
    ("gitlab", _answer(404, body={"message": "404 Group Not Found"}), "gitlab has no group 'acme'"),
    ("gitea", _answer(404, body={}), "gitea has no organization 'acme'"),
    (
        "github",
        _answer(403, GITHUB_403, {"message": "API rate limit exceeded"}),
        "rate limit reached for the token in ACME_TOKEN: no requests until 2026-01-01 00:00:00 UTC",
    ),
    ("github", _answer(429, {"retry-after": "120"}, {}), "no requests for 120 s (until"),
    ("gitlab", _answer(429, GITLAB_429, {}), "no requests until 2026-01-01 00:00:00 UTC"),
    (
        "gitea",
        _answer(429, {"retry-after": "Thu, 01 Jan 2026 00:00:00 GMT"}, text="slow down"),
        "no requests until 2026-01-01 00:00:00 UTC",
    ),
    ("gitea", _answer(429, text="slow down"), "ACME_TOKEN (429, no time given)"),
    (
        "github",
        _answer(200, {"content-type": "text/html"}, text="<html>Sign in</html>"),
        "body that is not JSON (text/html); is --api-url https://api.github.com the API's root?",
    ),
    ("github", _answer(200, body={"teams": []}), "GET /orgs/acme/teams with no list of objects"),
    ("github", _answer(200, body=[{"id": 1}]), "github teams of acme: an item has no 'slug'"),
    ("gitlab", _answer(200, body=[]), "answered GET /groups/acme with no JSON object"),
    ("github", _answer(301, {"location": MOVED}), f"moved GET /orgs/acme/teams to {MOVED} (301)"),
    ("gitea", _answer(502, text="Bad Gateway"), "gitea answered 502 to GET /orgs/acme/teams"),
    (
        "gitea",
        _raising(httpx.ConnectError),
        "cannot reach gitea at https://git.example.com/api/v1: no route",
    ),
    ("github", _raising(httpx.ReadTimeout), "did not answer GET /orgs/acme/teams within 30 s"),
]


@pytest.mark.parametrize(("host", "transport", "words"), REFUSALS)
def test_refusals_are_one_line_and_write_nothing(
    host: str,
    transport: httpx.MockTransport,
    words: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run: Run,
) -> None:
    monkeypatch.setenv("ACME_TOKEN", "t0k3n-secret")
    out = tmp_path / "grants.toml"
    api = ["--api-url", "https://git.example.com"] if host == "gitea" else []
    argv = ["--host", host, "--org", "acme", *api, "--token-env", "ACME_TOKEN", "--out", str(out)]
    code, stdout, err = run(transport, *argv)
    assert code == 2 and stdout == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert words in err, err
    assert "Traceback" not in err and "t0k3n-secret" not in err
    assert not out.exists()


def _pages(
    next_link: Callable[[httpx.Request], dict[str, str]],
) -> tuple[httpx.MockTransport, list[str]]:
    """A host whose every page is empty, with the headers ``next_link`` gives; and the URLs
    asked for."""
    asked: list[str] = []

    def reply(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(200, headers=next_link(request), json=[])

    return httpx.MockTransport(reply), asked


def test_a_pagination_loop_and_endless_pages_are_stopped(tmp_path: Path, run: Run) -> None:
    argv = ["--host", "github", "--org", "acme", "--out", str(tmp_path / "g.toml")]
    same, asked = _pages(lambda r: {"link": f'<{r.url}>; rel="next"'})
    code, _, err = run(same, *argv)
    assert code == 2 and "pagination loop: the next page of /orgs/acme/teams" in err
    assert len(asked) == 1

    def onward(request: httpx.Request) -> dict[str, str]:
        page = int(request.url.params.get("page", "1"))
        return {"link": f'<https://api.github.com/orgs/acme/teams?page={page + 1}>; rel="next"'}

    endless, asked = _pages(onward)
    code, _, err = run(endless, *argv)
    assert code == 2 and "after 500 pages" in err and len(asked) == code_hosts.MAX_PAGES


def test_gitlab_pages_that_point_back_are_a_loop(run: Run, tmp_path: Path) -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/groups/acme"):
            return httpx.Response(200, json={"id": 10, "full_path": "acme"})
        return httpx.Response(200, headers={"x-next-page": "1"}, json=[])

    argv = ["--host", "gitlab", "--org", "acme", "--out", str(tmp_path / "g.toml")]
    code, _, err = run(httpx.MockTransport(reply), *argv)
    assert code == 2 and "pagination loop: the next page of /groups/10/descendant_groups" in err

    def garbled(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/groups/acme"):
            return httpx.Response(200, json={"id": 10, "full_path": "acme"})
        return httpx.Response(200, headers={"x-next-page": "two"}, json=[])

    code, _, err = run(httpx.MockTransport(garbled), *argv)
    assert code == 2 and "gitlab answered x-next-page 'two', which is no page number" in err


def test_a_next_page_on_another_host_is_not_asked_with_the_token(run: Run, tmp_path: Path) -> None:
    hosts: list[str] = []

    def reply(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        return httpx.Response(
            200, headers={"link": '<https://evil.example/x?page=2>; rel="next"'}, json=[]
        )

    code, _, err = run(
        httpx.MockTransport(reply),
        "--host",
        "github",
        "--org",
        "acme",
        "--out",
        str(tmp_path / "g.toml"),
    )
    assert code == 2 and "on another host (https://evil.example); the token is not sent" in err
    assert hosts == ["api.github.com"]


NO_TOKENS = {"CODERAG_API_TOKENS": ""}


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        (["--host", "gitea"], {}, "--api-url is required for gitea"),
        (["--host", "github", "--api-url", "ftp://x"], {}, "must be an http(s) URL"),
        (["--host", "gitlab"], {"GITLAB_TOKEN": ""}, "set GITLAB_TOKEN to a gitlab token with"),
        (["--host", "github", "--token-env", "MY_GH"], {}, "set MY_GH to a github token"),
        (["--host", "github"], NO_TOKENS, "CODERAG_API_TOKENS is empty here"),
        (["--host", "github", "--out", "g.yaml"], {}, "must end in .toml or .json"),
        (["--host", "github", "--users", "{tmp}/bad.toml"], {}, "has a table 'teams'"),
        (["--host", "github", "--base", "{tmp}/bad.toml"], {}, "--base: grants file"),
    ],
)
def test_arguments_that_cannot_work_say_what_to_fix(
    argv: list[str],
    env: dict[str, str],
    words: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run: Run,
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    (tmp_path / "bad.toml").write_text("[teams]\nx = 1\n")
    monkeypatch.setenv("CODERAG_GRANTS", str(tmp_path / "g.toml"))
    get_settings.cache_clear()
    never = httpx.MockTransport(lambda r: pytest.fail(f"asked {r.url} before checking"))
    argv = [*argv, "--org", "acme"]
    code, _, err = run(never, *(a.replace("{tmp}", str(tmp_path)) for a in argv))
    assert code == 2 and words in err and err.count("\n") == 1, err
    assert not (tmp_path / "g.toml").exists()


def test_no_grants_file_named(run: Run) -> None:
    code, _, err = run(None, "--host", "github", "--org", "acme")
    assert code == 2 and "--out FILE, or set CODERAG_GRANTS" in err


def test_the_command_reports_a_host_it_cannot_reach(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on: refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "grants.toml"
    argv = ["grants-sync", "--host", "gitea", "--org", "acme"]
    code = cli.main([*argv, "--api-url", f"http://127.0.0.1:{port}", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot reach gitea at http://127.0.0.1:{port}/api/v1" in err, err
    assert err.count("\n") == 1 and not out.exists()
    assert "grants-sync" in cli.build_parser().format_help()


@pytest.fixture
def app_grants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """CODERAG_GRANTS for a real app: a file that grants nothing yet."""
    grants = tmp_path / "grants.toml"
    grants.write_text("[grants]\n")
    monkeypatch.setenv("CODERAG_GRANTS", str(grants))
    get_settings.cache_clear()
    yield grants


def test_a_real_app_follows_the_syncs_without_a_restart(app_grants: Path, run: Run) -> None:
    admin, alice, bob = (
        {"Authorization": f"Bearer {t}"} for t in ("root-token", "alice-token", "bob-token")
    )
    argv = ["--host", "gitea", "--org", "acme", "--api-url", "https://git.example.invalid"]
    missing = {"detail": "no repository named 'bravo'; POST /repos to add it"}
    with TestClient(create_app(("coderag_parser",))) as client:
        for name in ("alpha", "bravo"):  # .invalid: the clone fails at once, the rows stay
            body = {"name": name, "url": f"https://git.example.invalid/acme/{name}.git"}
            assert client.post("/repos", json=body, headers=admin).status_code == 202
        assert client.get("/repos", headers=alice).json() == []
        code, _, err = run(Recorded("gitea", "live-before.json").transport(), *argv)
        assert code == 0, err  # written to CODERAG_GRANTS
        assert client.get("/repos/alpha", headers=alice).status_code == 200
        r = client.get("/repos/bravo", headers=alice)
        assert (r.status_code, r.json()) == (404, missing)
        assert [x["name"] for x in client.get("/repos", headers=alice).json()] == ["alpha"]
        assert client.get("/repos/bravo", headers=bob).status_code == 200
        assert client.get("/repos/alpha", headers=bob).status_code == 404
        code, _, err = run(Recorded("gitea", "live-after.json").transport(), *argv)
        assert code == 0, err  # alpha moved from team-a to team-b
        assert client.get("/repos/alpha", headers=alice).status_code == 404
        assert client.get("/repos", headers=alice).json() == []
        assert client.get("/repos/alpha", headers=bob).status_code == 200
        assert [x["name"] for x in client.get("/repos", headers=bob).json()] == ["alpha", "bravo"]
    assert read_grants(app_grants).groups == {
        "gitea:acme/team-a": frozenset({"alice"}),
        "gitea:acme/team-b": frozenset({"bob"}),
    }
