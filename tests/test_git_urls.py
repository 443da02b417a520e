"""URL repositories: https by default, other kinds and hosts only when settings allow them, no
credentials, branches git accepts; clones stopped past a time or size limit; no repository's git
configuration runs a program."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag_app.server import create_app
from coderag_parser import origins
from tests.conftest import commit_all, wait_ready


@pytest.fixture
def parser_client() -> Iterator[TestClient]:
    with TestClient(create_app(("coderag_parser",))) as c:
        yield c


def _set(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for key, value in values.items():
        monkeypatch.setenv(f"CODERAG_{key.upper()}", value)
    get_settings.cache_clear()


def _remote(tmp_path: Path, size: int = 100) -> str:
    """A bare repository with one commit on main, as a file:// URL."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.py").write_text("def main() -> int:\n    return 0\n")
    (work / "blob.bin").write_bytes(os.urandom(size))
    repo = git.Repo.init(work)
    repo.git.symbolic_ref("HEAD", "refs/heads/main")
    commit_all(repo, "init")
    bare = tmp_path / "remote.git"
    git.Repo.clone_from(str(work), bare, bare=True)
    return bare.as_uri()


def test_url_kinds_hosts_and_credentials(
    parser_client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _remote(tmp_path)
    cases = [
        (url, 403, "CODERAG_URL_SCHEMES"),
        ("http://127.0.0.1:9/r.git", 403, "http repository URLs are not allowed"),
        ("ssh://git@127.0.0.1:9/r.git", 403, "ssh"),
        ("git@127.0.0.1:r.git", 403, "ssh"),
        ("https://user:hunter2@127.0.0.1:9/r.git", 400, "credentials"),
        ("https://ghp_token123@127.0.0.1:9/r.git", 400, "credentials"),
        ("--upload-pack=touch /tmp/x", 400, "git URL"),
        ("ext::sh%20-c%20touch", 400, "remote helper"),
        ("https://127.0.0.1:notaport/r", 400, "not a valid URL"),
        ("https://127.0.0.1:70000/r", 400, "git URL"),
        ("git@host:x://y", 400, "git URL"),
        ("/srv/repo.git", 400, "git URL"),
    ]
    for i, (u, status, words) in enumerate(cases):
        r = parser_client.post("/repos", json={"name": f"u{i}", "url": u})
        assert r.status_code == status, (u, r.text)
        assert words in r.json()["detail"], (u, r.json())
        assert "hunter2" not in r.text
    assert parser_client.get("/repos").json() == []
    _set(monkeypatch, url_hosts="127.0.0.1,.corp.example")
    for host, status in [
        ("evil.example", 403),
        ("corp.example.evil.example", 403),
        ("127.0.0.2", 403),
        ("127.0.0.1", 202),  # the clone then fails on the closed loopback port
    ]:
        r = parser_client.post("/repos", json={"name": host, "url": f"https://{host}:9/r.git"})
        assert r.status_code == status, (host, r.text)
    assert origins._host_matches("x.corp.example", ".corp.example")
    assert origins._host_matches("corp.example", ".corp.example")
    assert wait_ready(parser_client, "127.0.0.1")["status"] == "error"


def test_branches_are_checked_like_git(parser_client: TestClient) -> None:
    _url = "https://127.0.0.1:9/r.git"
    for branch in ("bad..name", "-D", "a b", "x.lock", "feature/", "@{-1}", ""):
        r = parser_client.post("/repos", json={"name": "b", "url": _url, "branch": branch})
        assert r.status_code == 400 and "not a valid git branch" in r.json()["detail"], branch
    r = parser_client.post("/repos", json={"name": "b", "url": _url, "branch": "feature/x-1"})
    assert r.status_code == 202, r.text


@pytest.fixture
def no_embed2(monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, embed_model_2="")


@pytest.mark.slow
def test_file_urls_when_allowed_and_clone_limits(
    no_embed2: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _remote(tmp_path, size=300_000)
    _set(monkeypatch, url_schemes="https,file")
    with TestClient(create_app()) as client:
        assert client.post("/repos", json={"name": "ok", "url": url}).status_code == 202
        repo = wait_ready(client, "ok")
        assert repo["status"] == "ready" and repo["url"] == url, repo
        config = (get_settings().data_dir / "repos" / "ok" / ".git" / "config").read_text()
        assert url in config
        # a file:// URL is a path on this server: the path roots apply to it too
        _set(monkeypatch, repo_roots=str(tmp_path / "elsewhere"))
        r = client.post("/repos", json={"name": "out", "url": url})
        assert r.status_code == 403 and "CODERAG_REPO_ROOTS" in r.json()["detail"]
        _set(monkeypatch, repo_roots=str(tmp_path), max_clone_bytes="100000")
        assert client.post("/repos", json={"name": "big", "url": url}).status_code == 202
        repo = wait_ready(client, "big")
        assert repo["status"] == "error" and "CODERAG_MAX_CLONE_BYTES" in repo["error"], repo
        assert not (get_settings().data_dir / "repos" / "big").exists()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback TCP server that accepts connections and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    sock.close()


def test_a_hanging_clone_is_stopped(
    parser_client: TestClient, silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _set(monkeypatch, git_timeout="2")
    url = f"https://127.0.0.1:{silent_server}/r.git"
    assert parser_client.post("/repos", json={"name": "slow", "url": url}).status_code == 202
    repo = wait_ready(parser_client, "slow", timeout=60)
    assert repo["status"] == "error" and "CODERAG_GIT_TIMEOUT" in repo["error"], repo


@pytest.mark.slow
def test_repository_git_config_runs_no_program(
    no_embed2: None, tmp_path: Path, sample_repo: Path
) -> None:
    marker = tmp_path / "pwned"
    hook = tmp_path / "evil.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    repo = git.Repo(sample_repo)
    with repo.config_writer() as cfg:
        cfg.set_value("core", "fsmonitor", str(hook))
        cfg.set_value("core", "hooksPath", str(tmp_path))
    (sample_repo / "dirty.py").write_text("x = 1\n")  # makes the indexer ask git status
    with TestClient(create_app()) as client:
        r = client.post("/repos", json={"name": "s", "path": str(sample_repo)})
        assert r.status_code == 202
        assert wait_ready(client, "s")["status"] == "ready"
    assert not marker.exists(), "the repository's core.fsmonitor program ran"
