"""One bad file never fails a repository: a file nesting too deeply for the parser, or one whose
parser process dies, is skipped and counted by reason in ``GET /repos/{name}``."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient

from coderag import chain
from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_app.server import create_app
from tests.conftest import commit_all, wait_ready


def deep_java(levels: int) -> str:
    """A Java class nesting ``levels`` classes, one method in the innermost."""
    opened = "".join(f"class C{i} {{\n" for i in range(levels))
    return opened + "  void innermost() { return; }\n" + "}\n" * levels


def make_repo(root: Path, files: int, deep: int = 1200, body: int = 0) -> git.Repo:
    """``files`` Python modules of one function (``body`` extra statements long), a
    ``deep``-level nested Java class and a binary file."""
    (root / "pkg").mkdir(parents=True)
    for i in range(files):
        lines = "".join(f"    v{j} = request.value * {j}\n" for j in range(body))
        (root / "pkg" / f"mod{i:03d}.py").write_text(
            f"def handler_{i}(request):\n{lines}    return request.value + {i}\n"
        )
    (root / "Deep.java").write_text(deep_java(deep))
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    repo = git.Repo.init(root)
    commit_all(repo, "modules and a deep class")
    return repo


@pytest.fixture(autouse=True)
def one_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """One encoder is enough here; the second would only double the time."""
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()


@pytest.mark.parametrize("files", [3, 70], ids=["in-process", "parser-pool"])
def test_a_too_deep_file_is_skipped_and_counted(
    files: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODERAG_PARSE_WORKERS", "2")
    get_settings.cache_clear()
    root = tmp_path / "deep"
    repo = make_repo(root, files)
    with TestClient(create_app()) as client:
        client.post("/repos", json={"name": "deep", "path": str(root)})
        body = wait_ready(client, "deep")
        assert body["status"] == "ready", body
        assert body["skipped_by_reason"] == {"too_deep": 1, "unsupported_type": 1}
        assert body["skipped"] == 2 and body["files"] == files
        units = get_catalog().units("deep")
        # blamed on worker processes for the pool-sized repository, in this process otherwise
        assert units and all(u.last_commit == repo.head.commit.hexsha for u in units)
        if files > 3:
            return  # the pool path counts the same; pushes are checked once, below

        (root / "Deep.java").write_text(deep_java(3))  # fixed by a push: indexed, count gone
        commit_all(repo, "flatten")
        client.post("/repos/deep/reindex")
        body = wait_ready(client, "deep")
        assert body["skipped_by_reason"] == {"unsupported_type": 1}, body
        assert "Deep.java" in get_catalog().file_shas("deep")

        (root / "Deep.java").write_text(deep_java(1200))  # and back: skipped again, not kept
        commit_all(repo, "nest again")
        client.post("/repos/deep/reindex")
        body = wait_ready(client, "deep")
        assert body["status"] == "ready"
        assert body["skipped_by_reason"] == {"too_deep": 1, "unsupported_type": 1}, body
        assert "Deep.java" not in get_catalog().file_shas("deep")


@pytest.mark.slow
def test_a_killed_parser_process_skips_only_the_file_it_was_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODERAG_PARSE_WORKERS", "2")
    get_settings.cache_clear()
    root = tmp_path / "crash"
    # enough files, each long enough to take a few milliseconds, that the pool still has work
    # when each kill lands (tiny files could all be parsed before this process sees the 150th
    # result, and the second kill would then find nothing to interrupt)
    make_repo(root, 300, deep=3, body=150)
    kills: list[int] = []

    def kill_workers(repo: str, stage: str, done: int, total: int) -> None:
        # SIGKILL the parser processes twice (as the OOM killer would): once in the pool, once
        # while the batch is re-run one file at a time
        if stage == "parsing" and done in (1, 150) and done not in kills:
            kills.append(done)
            for child in multiprocessing.active_children():
                os.kill(child.pid, signal.SIGKILL)

    stop = chain.listen(kill_workers)
    try:
        get_catalog().create_repo("crash", str(root), None, None)
        run_now(IndexRepo(repo="crash"))
    finally:
        stop()
    repo = get_catalog().get_repo("crash")
    assert kills == [1, 150], "both kills happened"
    assert repo.status == "ready", repo
    reasons = repo.skipped_by_reason
    assert reasons.get("unsupported_type") == 1
    assert reasons.get("parser_crash") == 1, reasons  # the file in the second kill's process
    assert repo.files == 300
