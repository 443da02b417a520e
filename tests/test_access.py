"""Who may do what: repository roots, token roles, sessions per user, /docs behind the tokens,
the Host header, and a server that will not listen beyond loopback without tokens."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag_app.server import create_app
from harness.serve import Server, start_server, stop_server, wait_healthy

ADMIN, READER, OLD = "Bearer admin-token-1", "Bearer reader-token-2", "Bearer old-token-3"


@pytest.fixture
def parser_client() -> Iterator[TestClient]:
    with TestClient(create_app(("coderag_parser",))) as c:
        yield c


def _roots(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("CODERAG_REPO_ROOTS", raising=False)
    else:
        monkeypatch.setenv("CODERAG_REPO_ROOTS", value)
    get_settings.cache_clear()


@pytest.mark.slow
def test_paths_only_under_repo_roots(
    parser_client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "svc").mkdir(parents=True)
    outside.mkdir()
    (allowed / "escape").symlink_to(outside)
    _roots(monkeypatch, str(allowed))
    cases = [
        ("/etc", 403, "CODERAG_REPO_ROOTS"),
        ("~", 403, "outside CODERAG_REPO_ROOTS"),
        (str(allowed / "escape"), 403, str(outside)),  # the link resolves outside
        (str(allowed / "svc" / ".." / ".." / "outside"), 403, "outside"),
        ("~nosuchuser-xyz/src", 400, "not a user"),
        ("bad\x00path", 400, "path holds a NUL character"),
        (str(allowed / "missing"), 400, "does not exist"),
    ]
    for i, (path, status, words) in enumerate(cases):
        r = parser_client.post("/repos", json={"name": f"r{i}", "path": path})
        assert r.status_code == status, (path, r.text)
        assert words in r.json()["detail"], (path, r.json())
    r = parser_client.post("/repos", json={"name": "svc", "path": str(allowed / "svc")})
    assert r.status_code == 202, r.text
    assert parser_client.get("/repos/svc").json()["path"] == str((allowed / "svc").resolve())


def test_empty_roots_refuse_paths_and_unset_means_cwd(
    parser_client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here" / "svc").mkdir(parents=True)
    _roots(monkeypatch, "")
    r = parser_client.post("/repos", json={"name": "a", "path": str(tmp_path / "here")})
    assert r.status_code == 403 and "CODERAG_REPO_ROOTS is empty" in r.json()["detail"]
    _roots(monkeypatch, None)
    monkeypatch.chdir(tmp_path / "here")
    assert parser_client.post("/repos", json={"name": "b", "path": "svc"}).status_code == 202
    r = parser_client.post("/repos", json={"name": "c", "path": str(tmp_path)})
    assert r.status_code == 403, r.text


def test_repo_names_with_dot_dot_are_400(parser_client: TestClient, tmp_path: Path) -> None:
    r = parser_client.post("/repos", json={"name": "a..b", "path": str(tmp_path)})
    assert r.status_code == 400 and "'..'" in r.json()["detail"]
    for method, url in (("GET", "/repos/a..b"), ("POST", "/repos/a..b/reindex")):
        r = parser_client.request(method, url)
        assert r.status_code == 400 and "'..'" in r.json()["detail"], r.text
    assert parser_client.get("/repos/a.b").status_code == 404


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "CODERAG_API_TOKENS", "ada:admin-token-1:admin,bob:reader-token-2:reader,cy:old-token-3"
    )
    get_settings.cache_clear()


def test_roles(tokens: None, tmp_path: Path) -> None:
    (tmp_path / "svc").mkdir()
    body = {"name": "svc", "path": str(tmp_path / "svc")}
    with TestClient(create_app()) as client:
        reader, admin = {"Authorization": READER}, {"Authorization": ADMIN}
        r = client.post("/repos", json=body, headers=reader)
        assert r.status_code == 403 and "admin" in r.json()["detail"], r.text
        assert client.post("/repos", json=body).status_code == 401
        assert client.post("/repos", json=body, headers=admin).status_code == 202
        r = client.post("/repos", json={**body, "name": "svc2"}, headers={"Authorization": OLD})
        assert r.status_code == 202  # the user:token form keeps its admin powers
        for method, url in [
            ("POST", "/repos/svc/reindex"),
            ("DELETE", "/repos/svc"),
        ]:
            r = client.request(method, url, headers=reader)
            assert r.status_code == 403, (url, r.text)
            assert client.request(method, url).status_code == 401
        assert client.get("/repos", headers=reader).status_code == 200
        assert client.get("/repos/svc", headers=reader).json()["name"] == "svc"
        query = {"query": "where", "repo": "nope"}
        for url in ("/search", "/ask", "/retrieve"):
            assert client.post(url, json=query, headers=reader).status_code == 404, url
            assert client.post(url, json=query).status_code == 401, url
        for url in ("/openapi.json", "/docs"):
            assert client.get(url).status_code == 401, url
            assert client.get(url, headers=reader).status_code == 200, url
        assert client.get("/openapi.json", headers=reader).json()["paths"]["/repos"]
        assert client.get("/health").status_code == 200
        # the audit export: a reader's own rows, an admin's every row
        assert client.get("/audit/export.csv").status_code == 401
        mine = client.get("/audit/export.csv", headers=reader)
        everyone = client.get("/audit/export.csv", headers=admin)
        assert mine.status_code == everyone.status_code == 200, (mine.text, everyone.text)
        users = {row["user"] for row in csv.DictReader(io.StringIO(mine.text))}
        assert users == {"bob"}, users
        users = {row["user"] for row in csv.DictReader(io.StringIO(everyone.text))}
        assert "bob" in users and len(users) > 1, users
        assert client.delete("/repos/svc", headers=admin).status_code == 204


def test_sessions_belong_to_their_user(tokens: None) -> None:
    with TestClient(create_app()) as client:
        ask = {"query": "where are orders created", "repo": "nope", "session_id": "team-1"}
        assert client.post("/ask", json=ask, headers={"Authorization": ADMIN}).status_code == 404
        r = client.post("/ask", json=ask, headers={"Authorization": READER})
        assert r.status_code == 403 and "another user" in r.json()["detail"]
        # the owner can keep using it
        assert client.post("/ask", json=ask, headers={"Authorization": ADMIN}).status_code == 404


def _coderag(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "coderag_app.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("tokens_value", "words"),
    [
        ("ada", "is not user:token or user:token:role"),
        ("ada:tok:root", "role 'root'"),
        ("ada:t1:admin,bob:t1:reader", "already in use"),
        ("a b:secret-x", "needs a user name"),
    ],
)
def test_malformed_tokens_stop_start_up(tokens_value: str, words: str) -> None:
    done = _coderag("serve", "--service", "parser", env={"CODERAG_API_TOKENS": tokens_value})
    assert done.returncode == 2, done.stderr
    assert "CODERAG_API_TOKENS" in done.stderr and words in done.stderr, done.stderr
    assert "secret-x" not in done.stderr and "tok:" not in done.stderr  # tokens never printed


def test_a_single_service_refuses_to_listen_beyond_loopback_without_tokens() -> None:
    done = _coderag("serve", "--service", "parser", "--host", "0.0.0.0", env={})
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0" in done.stderr and "CODERAG_API_TOKENS" in done.stderr


def test_host_header_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODERAG_ALLOWED_HOSTS")
    get_settings.cache_clear()
    with TestClient(create_app(("coderag_parser",))) as client:
        for host in ("localhost", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST:1"):
            assert client.get("/repos", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example", "evil.example:8000", "127.0.0.1.nip.io", ""):
            r = client.get("/health", headers={"Host": host})
            assert r.status_code == 400 and "CODERAG_ALLOWED_HOSTS" in r.json()["detail"], host
        monkeypatch.setenv("CODERAG_ALLOWED_HOSTS", "code.example.org")
        get_settings.cache_clear()
        assert client.get("/repos", headers={"Host": "code.example.org"}).status_code == 200
        assert client.get("/repos", headers={"Host": "localhost"}).status_code == 400


def _serve(args: list[str], env: dict[str, str]) -> Server:
    """``coderag serve ARGS`` (``--host`` only as ARGS say) with this environment and ``env``,
    its output unbuffered to a pipe the test reads."""
    return start_server({**os.environ, **env}, args=args, host=None, cwd=None, unbuffered=True)


def test_serve_index_allows_that_folder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "app.py").write_text("def main() -> int:\n    return 0\n")
    (tmp_path / "other").mkdir()
    env = {"CODERAG_EMBED_MODEL_2": "", "CODERAG_ALLOWED_HOSTS": "127.0.0.1"}
    env["CODERAG_REPO_ROOTS"] = ""  # only what --index adds
    server = _serve(["--service", "parser", "--index", str(project)], env)
    try:
        wait_healthy(server, timeout=240)
        # a generous timeout: the server is indexing the folder in the background meanwhile
        http = httpx.Client(base_url=server.base, timeout=120)
        r = http.post("/repos", json={"name": "sub", "path": str(project / "sub")})
        assert r.status_code == 202, r.text
        r = http.post("/repos", json={"name": "o", "path": str(tmp_path / "other")})
        assert r.status_code == 403, r.text
        assert http.get("/repos/project").json()["name"] == "project"
    finally:
        stop_server(server)


@pytest.mark.slow
def test_all_in_one_beyond_loopback_makes_and_prints_a_token() -> None:
    env = {"CODERAG_EMBED_MODEL_2": "", "CODERAG_API_TOKENS": ""}
    server = _serve(["--host", "0.0.0.0"], env)
    try:
        assert server.proc.stdout is not None
        token = ""
        for line in server.proc.stdout:
            if "Authorization: Bearer " in line:
                token = line.split("Bearer ", 1)[1].strip()
                break
        assert len(token) >= 20
        wait_healthy(server, timeout=240)
        http = httpx.Client(base_url=server.base, timeout=120)
        assert http.get("/repos").status_code == 401
        assert http.get("/repos", headers={"Authorization": f"Bearer {token}"}).json() == []
    finally:
        stop_server(server)
