"""The in-process queue runs each service's jobs on its own lane: a repository registered while
another's vectors are being written is parsed and searchable at once, its vectors queue behind
the first's, and draining waits for every lane. The first repository's embedding job is held at
its first batch, so the check is of a known state, never of a timing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient

from coderag import chain, queue
from coderag.settings import get_settings
from coderag_app.server import create_app
from tests.conftest import commit_all, wait_ready

WAIT_S = 600
"""Deadlock guard on a loaded machine, not a timing assertion."""


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The whole app in-process, one encoder."""
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()
    with TestClient(create_app()) as c:
        yield c


def small_repo(root: Path) -> Path:
    """A git repository with one Python function."""
    root.mkdir()
    (root / "billing.py").write_text("def refund_invoice(invoice):\n    return invoice.total\n")
    commit_all(git.Repo.init(root), "billing")
    return root


def test_a_second_repository_is_searchable_while_the_first_embeds(
    client: TestClient, sample_repo: Path, tmp_path: Path
) -> None:
    held, release = threading.Event(), threading.Event()

    def hold(repo: str, stage: str, done: int, total: int) -> None:
        if repo == "first" and stage.startswith("embedding"):
            held.set()
            assert release.wait(WAIT_S), "the test never released the batch"

    stop = chain.listen(hold)
    try:
        assert client.post("/repos", json={"name": "first", "path": str(sample_repo)}).is_success
        assert held.wait(WAIT_S), "the first repository's vectors never started"
        second = small_repo(tmp_path / "billing")
        assert client.post("/repos", json={"name": "second", "path": str(second)}).is_success
        deadline = time.monotonic() + WAIT_S
        while client.get("/repos/second").json()["status"] != "ready":
            assert time.monotonic() < deadline, "the second repository waited for the first"
            time.sleep(0.05)
        hits = client.post("/search", json={"query": "refund_invoice", "repo": "second"}).json()
        assert hits["results"][0]["symbol"] == "refund_invoice", hits
        assert client.get("/repos/first").json()["complete"] is False  # still held
        assert queue.pending() >= 1 or queue.held_here("second")  # its vectors wait their turn
    finally:
        release.set()
        stop()
    assert wait_ready(client, "first", WAIT_S)["complete"] is True
    queue.drain()
    assert client.get("/repos/second").json()["complete"] is True
    assert queue.pending() == 0 and not queue.held_here("first")
