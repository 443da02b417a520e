"""``POST /repos/{name}/history`` for tracked files the index skipped (a binary, a file over the
size limit, a vendored path, a generated file): answered exactly as a path the repository does
not have (the range as asked, no commit, no change), so history never blames, logs or reads a
file the index refused; an indexed file beside them keeps its history. A real git repository in
a temp folder, indexed by the real pipeline, asked over HTTP."""

from __future__ import annotations

from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag_app.server import create_app
from tests.conftest import commit_all, wait_ready

LIMIT = 4096
"""CODERAG_MAX_FILE_BYTES for the test: big.py is over it."""

SKIPPED = ("big.py", "image.py", "vendor/lib.py", "api_pb2.py")
"""Tracked files the index leaves out: too large, binary, vendored, generated."""

END = 10**9
"""An end line past every file's end (what a who/when question about a whole file asks)."""


def write(root: Path, version: int) -> None:
    """Every file of the repository at ``version`` (1 or 2: each file changes in 2)."""
    (root / "vendor").mkdir(parents=True, exist_ok=True)
    (root / "shop.py").write_text(f"def total(items):\n    return sum(items) + {version}\n")
    (root / "big.py").write_text("".join(f"X_{i} = {version}\n" for i in range(LIMIT // 8)))
    (root / "image.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes([version]) * 64)
    (root / "vendor" / "lib.py").write_text(f"def vendored():\n    return {version}\n")
    (root / "api_pb2.py").write_text(f"def message():\n    return {version}\n")


@pytest.mark.slow
def test_history_answers_a_skipped_file_as_one_the_repository_does_not_have(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODERAG_MAX_FILE_BYTES", str(LIMIT))
    get_settings.cache_clear()
    root = tmp_path / "shop"
    repo = git.Repo.init(root)
    write(root, 1)
    commit_all(repo, "first")
    write(root, 2)
    second = commit_all(repo, "second")[:7]
    assert len(repo.git.ls_files().split()) == 1 + len(SKIPPED)  # all of them tracked

    with TestClient(create_app()) as client:
        assert client.post("/repos", json={"name": "shop", "path": str(root)}).status_code == 202
        state = wait_ready(client, "shop")
        assert (state["status"], state["files"]) == ("ready", 1), state
        assert {"too_large", "binary"} <= set(state["skipped_by_reason"]), state
        for path in ("shop.py", *SKIPPED):
            found = client.get("/repos/shop/file", params={"path": path})
            assert found.status_code == (200 if path == "shop.py" else 404), (path, found.text)

        asked = [
            {"file": path, "start_line": 1, "end_line": END}
            for path in ("shop.py", *SKIPPED, "nothere.py")
        ]
        reply = client.post("/repos/shop/history", json={"ranges": asked, "log": True})
    assert reply.status_code == 200, reply.text
    answered = {r["file"]: r for r in reply.json()["ranges"]}
    indexed = answered.pop("shop.py")
    assert indexed["end_line"] == 2 and indexed["last"]["commit"] == second, indexed
    assert len(indexed["changes"]) == 2, indexed
    unknown = {**answered.pop("nothere.py"), "file": None}
    assert unknown == {
        "file": None,
        "start_line": 1,
        "end_line": END,
        "last": None,
        "changes": [],
        "folder": False,
    }
    for path in SKIPPED:
        assert {**answered[path], "file": None} == unknown, (path, answered[path])
