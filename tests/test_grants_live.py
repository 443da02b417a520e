"""Per-repository grants against a real server (issue 45): two reader tokens granted different
repositories (each with a ref) walk every operation of the server's OpenAPI schema, the routes
outside it (/metrics, the page, /docs) and every MCP tool. Neither ever reads the other team's
repository: its name, code, files and commits never appear in an answer, and each request about
it answers byte for byte as the same request about a repository that does not exist. Then the
grants file is edited under the running server and the change takes effect at once."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import git
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from coderag.store.refs import ref_key
from tests.conftest import commit_all
from tests.liveserver import live_server, wait_complete

pytestmark = pytest.mark.slow

ADMIN, ALICE, BOB, CAROL = "root-token-0", "alice-token-1", "bob-token-2", "carol-token-3"
TOKENS = f"root:{ADMIN}:admin,alice:{ALICE}:reader,bob:{BOB}:reader,carol:{CAROL}:reader"
ALPHA, BRAVO, NOBODY = "alpha-pay", "bravo-vault", "charlie-none"
REF = "release"

GRANTS = """
[groups]
team-a = ["alice"]

[grants]
team-a = ["alpha-*"]
bob = ["bravo-vault"]
"""

CODE = {
    ALPHA: (
        "def helper(a: int, b: int) -> int:\n"
        '    """Add two amounts for the payroll."""\n'
        "    return alpha_total(a, b)\n\n\n"
        "def alpha_total(a: int, b: int) -> int:\n"
        "    return a + b\n\n\n"
        "def twice(a: int) -> int:\n"
        "    return helper(a, a)\n"
    ),
    BRAVO: (
        "def helper(a: int, b: int) -> int:\n"
        '    """Multiply two keys in the vault."""\n'
        "    return bravo_secret_marker(a, b)\n\n\n"
        "def bravo_secret_marker(a: int, b: int) -> int:\n"
        "    return a * b\n\n\n"
        "def twice(a: int) -> int:\n"
        "    return helper(a, a)\n"
    ),
}
"""Both repositories hold ``calc.py`` with ``helper`` and ``twice``, so one request fits each."""

SECRET_FILE = {ALPHA: "alpha_ledger.py", BRAVO: "bravo_keys.py"}
"""A file only that repository holds."""


@dataclass
class Team:
    """A reader token, the repository it may read and what it must never see of the other."""

    token: str
    own: str
    other: str
    secrets: list[str]
    """The other repository's name, code, file and commits."""


@dataclass
class Server:
    """The running server, its grants file and its teams."""

    base: str
    grants: Path
    teams: dict[str, Team]


def _write(path: Path, text: str) -> None:
    """Replace the file whole, as a config tool does (a new inode: its change is seen at once)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _make_repo(root: Path, name: str) -> list[str]:
    """A git repository with ``calc.py`` on its branch and on a ``release`` branch; its
    commits."""
    root.mkdir()
    (root / "calc.py").write_text(CODE[name])
    (root / SECRET_FILE[name]).write_text(f"SECRET_{name.split('-')[0].upper()} = 1\n")
    repo = git.Repo.init(root)
    first = commit_all(repo, f"{name} first")
    repo.git.checkout("-b", REF)
    (root / "calc.py").write_text(CODE[name] + "\n\ndef release_note() -> str:\n    return 'r'\n")
    second = commit_all(repo, f"{name} release")
    repo.git.checkout("-")
    return [first, second]


def _wait_ref(http: httpx.Client, name: str) -> None:
    for _ in range(1200):
        body = http.get(f"/repos/{name}/refs/{REF}").json()
        if body["status"] == "error" or (body["status"] == "ready" and body["complete"]):
            assert body["status"] == "ready", body
            return
        time.sleep(0.5)
    raise AssertionError(f"ref {REF} of {name} not complete")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One real server with both teams' repositories (and a ref of each) completely indexed."""
    base = tmp_path_factory.mktemp("grants")
    data = base / "data"
    data.mkdir()
    commits = {name: _make_repo(base / name, name) for name in (ALPHA, BRAVO)}
    grants = base / "grants.toml"
    _write(grants, GRANTS)
    env = {"CODERAG_API_TOKENS": TOKENS, "CODERAG_GRANTS": str(grants)}
    with live_server(data, 900, (), CODERAG_EMBED_MODEL_2="", **env) as url:
        with httpx.Client(base_url=url, headers=_auth(ADMIN), timeout=120) as http:
            for name in (ALPHA, BRAVO):
                body = {"name": name, "path": str(base / name), "refs": [REF]}
                assert http.post("/repos", json=body).status_code == 202
            for name in (ALPHA, BRAVO):
                assert wait_complete(http, name)["status"] == "ready"
                _wait_ref(http, name)

        def team(token: str, own: str, other: str) -> Team:
            secrets = [other, "bravo_secret_marker" if other == BRAVO else "alpha_total"]
            secrets += [SECRET_FILE[other], *commits[other], *(c[:12] for c in commits[other])]
            return Team(token, own, other, secrets)

        teams = {"alice": team(ALICE, ALPHA, BRAVO), "bob": team(BOB, BRAVO, ALPHA)}
        yield Server(url, grants, teams)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


Request = dict[str, Any]
"""httpx.request's keyword arguments: method, url, params, json, headers."""


def _history(repo: str) -> Request:
    body = {"ranges": [{"file": "calc.py", "start_line": 1, "end_line": 3}], "log": True}
    return {"method": "POST", "url": f"/repos/{repo}/history", "json": body}


def _chat(repo: str, stream: bool) -> Request:
    messages = [{"role": "user", "content": "what does twice do"}]
    body = {"model": f"coderag/{repo}", "messages": messages, "stream": stream}
    return {"method": "POST", "url": "/v1/chat/completions", "json": body}


SSE = {"Accept": "text/event-stream"}
ASK = "what does twice do"

OPERATIONS: dict[tuple[str, str], Callable[[str], list[Request]]] = {
    ("GET", "/health"): lambda r: [{"url": "/health"}],
    ("GET", "/audit/export.csv"): lambda r: [{"url": "/audit/export.csv"}],
    ("GET", "/repos/{name}/file"): lambda r: [
        {"url": f"/repos/{r}/file", "params": {"path": "calc.py"}},
        {"url": f"/repos/{r}/file", "params": {"path": "calc.py", "ref": REF, "start": 2}},
        {"url": f"/repos/{r}/file", "params": {"path": "missing.py"}},
    ],
    ("POST", "/repos"): lambda r: [{"method": "POST", "url": "/repos", "json": {"name": r}}],
    ("GET", "/repos"): lambda r: [{"url": "/repos"}],
    ("GET", "/repos/{name}"): lambda r: [{"url": f"/repos/{r}"}, {"url": f"/repos/{r}@x"}],
    ("DELETE", "/repos/{name}"): lambda r: [{"method": "DELETE", "url": f"/repos/{r}"}],
    ("POST", "/repos/{name}/reindex"): lambda r: [
        {"method": "POST", "url": f"/repos/{r}/reindex", "params": {"ref": REF}}
    ],
    ("POST", "/repos/{name}/refs"): lambda r: [
        {"method": "POST", "url": f"/repos/{r}/refs", "json": {"ref": "other"}}
    ],
    ("GET", "/repos/{name}/refs"): lambda r: [{"url": f"/repos/{r}/refs"}],
    ("GET", "/repos/{name}/refs/{ref}"): lambda r: [
        {"url": f"/repos/{r}/refs/{REF}"},
        {"url": f"/repos/{r}/refs/no-such"},
    ],
    ("DELETE", "/repos/{name}/refs/{ref}"): lambda r: [
        {"method": "DELETE", "url": f"/repos/{r}/refs/{REF}"}
    ],
    ("POST", "/webhooks/github"): lambda r: [{"method": "POST", "url": "/webhooks/github"}],
    ("POST", "/webhooks/gitlab"): lambda r: [{"method": "POST", "url": "/webhooks/gitlab"}],
    ("POST", "/webhooks/gitea"): lambda r: [{"method": "POST", "url": "/webhooks/gitea"}],
    ("GET", "/repos/{name}/symbols"): lambda r: [
        {"url": f"/repos/{r}/symbols"},
        {"url": f"/repos/{r}/symbols", "params": {"q": "re", "ref": REF}},
    ],
    ("GET", "/repos/{name}/calls"): lambda r: [
        {"url": f"/repos/{r}/calls", "params": {"symbol": "helper"}},
        {"url": f"/repos/{r}/calls", "params": {"symbol": "twice", "ref": REF}},
        {"url": f"/repos/{r}/calls", "params": {"symbol": "no_such_symbol"}},
    ],
    ("POST", "/repos/{name}/history"): lambda r: [_history(r), _history(ref_key(r, REF))],
    ("GET", "/repos/{name}/health"): lambda r: [
        {"url": f"/repos/{r}/health"},
        {"url": f"/repos/{ref_key(r, REF)}/health"},  # a ref's key, as the generator calls it
    ],
    ("GET", "/repos/{name}/freshness"): lambda r: [
        {"url": f"/repos/{r}/freshness"},
        {"url": f"/repos/{ref_key(r, REF)}/freshness"},  # as the generator asks for a ref
    ],
    ("POST", "/embed"): lambda r: [{"method": "POST", "url": "/embed", "json": {"texts": ["x"]}}],
    ("GET", "/embed/spaces"): lambda r: [{"url": "/embed/spaces"}],
    ("POST", "/embed/rerank"): lambda r: [
        {"method": "POST", "url": "/embed/rerank", "json": {"query": "x", "texts": ["twice"]}}
    ],
    ("POST", "/search"): lambda r: [
        {"method": "POST", "url": "/search", "json": {"query": "twice helper", "repo": r}},
        {"method": "POST", "url": "/search", "json": {"query": "release", "repo": r, "ref": REF}},
        {"method": "POST", "url": "/search", "json": {"query": "x", "repo": r, "ref": "nope"}},
        {"method": "POST", "url": "/search", "json": {"query": " ", "repo": r}},
    ],
    ("POST", "/retrieve"): lambda r: [
        {"method": "POST", "url": "/retrieve", "json": {"query": "twice helper", "repo": r}},
        {"method": "POST", "url": "/retrieve", "json": {"query": "twice", "repo": r, "ref": REF}},
    ],
    ("POST", "/ask"): lambda r: [
        {"method": "POST", "url": "/ask", "json": {"query": ASK, "repo": r}},
        {"method": "POST", "url": "/ask", "json": {"query": ASK, "repo": r, "ref": REF}},
        {"method": "POST", "url": "/ask", "json": {"query": ASK, "repo": r}, "headers": SSE},
    ],
    ("GET", "/v1/models"): lambda r: [{"url": "/v1/models"}],
    ("POST", "/v1/chat/completions"): lambda r: [
        _chat(r, False),
        _chat(f"{r}@{REF}", False),
        _chat(r, True),
    ],
}
"""Every operation of the OpenAPI schema, each as requests about repository ``r``."""

OUTSIDE_THE_SCHEMA = ("/metrics", "/", "/static/app.js", "/docs", "/openapi.json")
"""Routes the schema leaves out, read with each token too."""


def _send(http: httpx.Client, request: Request, token: str) -> httpx.Response:
    request = {"method": "GET", **request}
    request["headers"] = {**_auth(token), **request.get("headers", {})}
    return http.request(**request)


def _shown(text: str, repo: str) -> str:
    """An answer with the repository it was about written as REPO, for comparing answers about
    two repositories (request ids and timings are not part of the comparison)."""
    text = re.sub(r'"(id|created|took_ms)":\s*("[^"]*"|[0-9.]+)', r'"\1":_', text)
    return text.replace(repo, "REPO")


def _no_secret(team: Team, request: Request, body: str) -> None:
    """No secret of the other team appears in ``body`` unless the request itself named it."""
    asked = json.dumps(request)
    for secret in team.secrets:
        if secret not in asked:
            assert secret not in body, (team.own, request, secret, body[:2000])


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_every_route_keeps_each_team_to_its_repositories(server: Server, who: str) -> None:
    team = server.teams[who]
    with httpx.Client(base_url=server.base, timeout=300) as http:
        schema = _send(http, {"url": "/openapi.json"}, team.token).json()
        operations = {(m.upper(), p) for p, ops in schema["paths"].items() for m in ops}
        # a new route fails here until it is walked, so none escapes the check
        assert operations == set(OPERATIONS), operations ^ set(OPERATIONS)
        own_ok = 0
        for op, make in sorted(OPERATIONS.items()):
            mine, theirs, nobodys = make(team.own), make(team.other), make(NOBODY)
            for own, other, missing in zip(mine, theirs, nobodys, strict=True):
                r_own = _send(http, own, team.token)
                r_other = _send(http, other, team.token)
                r_missing = _send(http, missing, team.token)
                for request, r in ((own, r_own), (other, r_other), (missing, r_missing)):
                    assert r.status_code < 500, (op, request, r.status_code, r.text[:500])
                    _no_secret(team, request, r.text)
                # the other team's repository answers as one that does not exist
                assert r_other.status_code == r_missing.status_code, (op, other, r_other.text)
                assert _shown(r_other.text, team.other) == _shown(r_missing.text, NOBODY), op
                own_ok += r_own.status_code < 300 and team.own in json.dumps(own)
        assert own_ok >= 20  # the team reads its own repository on each of those routes
        for path in OUTSIDE_THE_SCHEMA:
            r = _send(http, {"url": path}, team.token)
            assert r.status_code == 200, (path, r.text[:300])
            _no_secret(team, {}, r.text)
        repos = _send(http, {"url": "/repos"}, team.token).json()
        assert [(r["name"], [x["ref"] for x in r["refs"]]) for r in repos] == [(team.own, [REF])]
        models = [m["id"] for m in _send(http, {"url": "/v1/models"}, team.token).json()["data"]]
        assert models == [f"coderag/{team.own}", f"coderag/{team.own}@{REF}"]
        metrics = _send(http, {"url": "/metrics"}, team.token).text
        assert f'coderag_repo_units{{repo="{team.own}"}}' in metrics
        # the reader's audit export: their own requests about what they may read, no other's
        export = _send(http, {"url": "/audit/export.csv"}, team.token)
        assert export.status_code == 200, export.text
        rows = list(csv.DictReader(io.StringIO(export.text)))
        assert rows and {r["user"] for r in rows} == {who}, {r["user"] for r in rows}
        assert {r["repo"].split("@")[0] for r in rows} <= {team.own, ""}, rows[:3]
        assert any(r["repo"] == team.own and r["endpoint"] == "ask" for r in rows)


def test_admins_see_everything_and_ungranted_readers_nothing(server: Server) -> None:
    with httpx.Client(base_url=server.base, timeout=120) as http:
        names = {r["name"] for r in _send(http, {"url": "/repos"}, ADMIN).json()}
        assert names == {ALPHA, BRAVO}
        assert f'repo="{BRAVO}"' in _send(http, {"url": "/metrics"}, ADMIN).text
        for repo in (ALPHA, BRAVO):
            search = {"method": "POST", "url": "/search", "json": {"query": "x", "repo": repo}}
            assert _send(http, search, ADMIN).status_code == 200
        export = _send(http, {"url": "/audit/export.csv"}, ADMIN)
        assert export.status_code == 200 and ALPHA in export.text and BRAVO in export.text
        assert _send(http, {"url": "/repos"}, CAROL).json() == []
        assert _send(http, {"url": "/v1/models"}, CAROL).json()["data"] == []
        for repo in (ALPHA, BRAVO):
            r = _send(http, {"url": f"/repos/{repo}/symbols"}, CAROL)
            assert r.status_code == 404 and r.json()["detail"].startswith("no repository named")


TOOLS: dict[str, Callable[[str], list[dict[str, Any]]]] = {
    "list_repos": lambda r: [{}],
    "search_code": lambda r: [
        {"query": "twice helper", "repo": r},
        {"query": "release", "repo": r, "ref": REF},
    ],
    "ask": lambda r: [{"query": ASK, "repo": r}, {"query": ASK, "repo": r, "ref": REF}],
    "read_range": lambda r: [
        {"repo": r, "file": "calc.py"},
        {"repo": r, "file": "calc.py", "ref": REF},
    ],
    "symbols": lambda r: [{"repo": r, "prefix": "tw"}, {"repo": r, "ref": REF}],
    "callers": lambda r: [
        {"repo": r, "symbol": "helper"},
        {"repo": r, "symbol": "helper", "ref": REF},
    ],
    "callees": lambda r: [
        {"repo": r, "symbol": "twice"},
        {"repo": r, "symbol": "twice", "ref": REF},
    ],
}
"""Every MCP tool, each as calls about repository ``r``."""


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_every_mcp_tool_keeps_each_team_to_its_repositories(server: Server, who: str) -> None:
    team = server.teams[who]

    async def walk() -> None:
        async with (
            httpx2.AsyncClient(headers=_auth(team.token), timeout=300) as client,
            Client(streamable_http_client(f"{server.base}/mcp", http_client=client)) as mcp,
        ):
            assert {t.name for t in (await mcp.list_tools()).tools} == set(TOOLS)
            for tool, make in TOOLS.items():
                for own, other, missing in zip(
                    make(team.own), make(team.other), make(NOBODY), strict=True
                ):
                    r_own = await mcp.call_tool(tool, own)
                    assert not r_own.is_error, (tool, own, _text(r_own))
                    r_other = await mcp.call_tool(tool, other)
                    r_missing = await mcp.call_tool(tool, missing)
                    for args, r in ((own, r_own), (other, r_other), (missing, r_missing)):
                        _no_secret(team, args, _text(r))
                    assert r_other.is_error == r_missing.is_error, (tool, _text(r_other))
                    shown = _shown(_text(r_other), team.other)
                    assert shown == _shown(_text(r_missing), NOBODY), (tool, shown)

    anyio.run(walk)


def test_an_edited_grants_file_takes_effect_without_a_restart(server: Server) -> None:
    search = {"method": "POST", "url": "/search", "json": {"query": "helper", "repo": BRAVO}}
    try:
        with httpx.Client(base_url=server.base, timeout=120) as http:
            assert _send(http, search, ALICE).status_code == 404
            _write(server.grants, GRANTS.replace('["alpha-*"]', '["alpha-*", "bravo-*"]'))
            r = _send(http, search, ALICE)
            assert r.status_code == 200 and r.json()["results"], r.text
            names = [r["name"] for r in _send(http, {"url": "/repos"}, ALICE).json()]
            assert names == [ALPHA, BRAVO]
            # a broken edit leaves the last good grants in force, and tells the admin why
            _write(server.grants, "[grants]\nteam-a = 'alpha-*\n")
            assert _send(http, search, ALICE).status_code == 200
            health = _send(http, {"url": "/health"}, ADMIN).json()
            assert "is not valid UTF-8 TOML" in health["grants"], health
            _write(server.grants, GRANTS)  # revoked: at once, and as if it never existed
            r = _send(http, search, ALICE)
            assert r.status_code == 404
            assert r.json() == {"detail": f"no repository named {BRAVO!r}; POST /repos to add it"}
            assert [r["name"] for r in _send(http, {"url": "/repos"}, ALICE).json()] == [ALPHA]
            assert _send(http, {"url": "/health"}, ADMIN).json()["grants"] == "ok"
    finally:
        _write(server.grants, GRANTS)
