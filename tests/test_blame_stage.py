"""Blame is its own stage, after the keyword stage: the repository is searchable before its units'
last commits are known, they are recorded before the vectors (so vector metadata carries them),
and a file whose blame a crash cut off is blamed by the next job. The job is held at its blame
progress report, so each check is of a known state, never of a timing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient

from coderag import chain
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_app.server import create_app

WAIT_S = 600
"""Deadlock guard on a loaded machine, not a timing assertion."""


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The whole app in-process, one encoder."""
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()
    with TestClient(create_app()) as c:
        yield c


def wait_complete(client: TestClient, name: str) -> dict:
    """Poll the repository until its index is complete."""
    done = threading.Event()
    for _ in range(WAIT_S * 20):
        state = client.get(f"/repos/{name}").json()
        if state["status"] == "error":
            raise AssertionError(state)
        if state.get("complete"):
            return state
        done.wait(0.05)
    raise AssertionError(f"{name} never completed")


def order_hit(client: TestClient, name: str) -> dict:
    """The best /search hit for the Python fixture's OrderService class."""
    r = client.post("/search", json={"query": "OrderService", "repo": name, "top_k": 10})
    assert r.status_code == 200, r.text
    hits = [
        h
        for h in r.json()["results"]
        if h["symbol"] == "OrderService" and h["file"] == "src/python/sample.py"
    ]
    assert hits, r.json()
    return hits[0]


class Hold:
    """Holds the indexing job at its first blame progress report until released."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, repo: str, stage: str, done: int, total: int) -> None:
        if stage == "blaming" and threading.current_thread().name == "coderag-parser":
            self.held.set()
            assert self.release.wait(WAIT_S), "the test never released the blame stage"

    def wait_held(self) -> None:
        assert self.held.wait(WAIT_S), "the blame stage never ran"


def test_search_answers_before_blame_and_last_commits_land_before_complete(
    client: TestClient, sample_repo: Path
) -> None:
    hold = Hold()
    stop = chain.listen(hold)
    try:
        assert client.post("/repos", json={"name": "bl", "path": str(sample_repo)}).status_code
        hold.wait_held()
        state = client.get("/repos/bl").json()
        assert state["status"] == "ready" and state["complete"] is False, state
        assert state["progress"] == "blaming", state
        before = order_hit(client, "bl")
        assert before["last_commit"] is None  # searchable, last commits not known yet
        assert "src/python/sample.py" in get_catalog().unblamed_files("bl")
    finally:
        hold.release.set()
        stop()
    wait_complete(client, "bl")
    head = git.Repo(sample_repo).head.commit
    after = order_hit(client, "bl")
    assert after["last_commit"] == head.hexsha and after["last_author"] == head.author.name
    assert get_catalog().unblamed_files("bl") == []


def test_a_file_left_unblamed_is_blamed_by_the_next_job(
    client: TestClient, sample_repo: Path
) -> None:
    assert client.post("/repos", json={"name": "cut", "path": str(sample_repo)}).status_code
    wait_complete(client, "cut")
    head = git.Repo(sample_repo).head.commit.hexsha
    assert order_hit(client, "cut")["last_commit"] == head
    catalog = get_catalog()
    # what a worker killed between the keyword stage and set_blame leaves behind
    catalog.db.write(
        lambda conn: (
            conn.execute(
                "UPDATE files SET blamed=0 WHERE repo='cut' AND path='src/python/sample.py'"
            ),
            conn.execute(
                "UPDATE units SET last_commit=NULL, last_author=NULL, last_date=NULL "
                "WHERE repo='cut' AND file='src/python/sample.py'"
            ),
        )
    )
    assert catalog.unblamed_files("cut") == ["src/python/sample.py"]
    hold = Hold()
    stop = chain.listen(hold)
    try:
        assert client.post("/repos/cut/reindex").status_code == 202
        hold.wait_held()
        # a new generation: the retriever re-reads the file whose version moved, though its
        # content did not
        assert order_hit(client, "cut")["last_commit"] is None
    finally:
        hold.release.set()
        stop()
    wait_complete(client, "cut")
    assert catalog.unblamed_files("cut") == []
    assert order_hit(client, "cut")["last_commit"] == head
