"""Progressive indexing through the real app: once the parse ends the repository is ``ready`` and
keyword, symbol and exact search answer while vectors are still being written; each vector batch
is searchable as it lands; ``complete`` comes with the last one. The indexing job is held between
batches (at its progress report), so every check is of a known state, never of a timing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag import chain, queue
from coderag.chain import route_readiness
from coderag.eta import eta_seconds
from coderag.settings import get_settings
from coderag.store import get_catalog, get_vectors
from coderag.store.repos import SpaceProgress
from coderag_app.server import create_app
from coderag_embedder import tasks as embed_tasks

WAIT_S = 600
"""Deadlock guard on a loaded machine, not a timing assertion."""

BATCH = 4
"""Units per vector batch in this test, so the sample repository takes several."""


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The whole app in-process, one encoder, small vector batches."""
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()
    monkeypatch.setattr(embed_tasks, "CHUNK_UNITS", BATCH)
    with TestClient(create_app()) as c:
        yield c


class Gate:
    """Holds the indexing job at each vector batch's progress report until released."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()
        self.batches = 0

    def __call__(self, repo: str, stage: str, done: int, total: int) -> None:
        lane = threading.current_thread().name  # the in-process queue's embedder lane
        if not stage.startswith("embedding") or lane != "coderag-embedder":
            return
        self.batches += 1
        self.release.clear()
        self.held.set()
        assert self.release.wait(WAIT_S), "the test never released the batch"

    def wait_held(self) -> None:
        assert self.held.wait(WAIT_S), "no vector batch was reported"
        self.held.clear()

    def next(self) -> None:
        self.release.set()


def test_keyword_search_answers_before_vectors_and_batches_land_one_by_one(
    client: TestClient, sample_repo: Path
) -> None:
    gate = Gate()
    stop = chain.listen(gate)
    try:
        r = client.post("/repos", json={"name": "prog", "path": str(sample_repo)})
        assert r.status_code == 202
        gate.wait_held()  # the first batch of vectors is written; the job waits here

        state = client.get("/repos/prog").json()
        assert state["status"] == "ready" and state["complete"] is False, state
        assert state["searchable_at"] and state["stages"]["vector"] == {
            "done": BATCH,
            "total": state["units"],
        }
        assert state["units"] > 3 * BATCH
        first = get_vectors().ids("prog")
        assert len(first) == BATCH, "one batch is in Chroma"

        body = client.post(
            "/search", json={"query": "OrderService._audit", "repo": "prog", "top_k": 5}
        ).json()
        top = [h for h in body["results"] if h["symbol"] == "OrderService._audit"]
        assert top and {"keyword", "exact"} <= set(top[0]["routes"]), body["results"]
        assert {"keyword", "symbol", "exact"} <= set(body["routes_ready"])
        assert body["routes_missing"] == ["vector"]
        # the vector route searches the batch that landed, and nothing else
        unit_ids = {u.id: u for u in get_catalog().units("prog")}
        vector_hits = [h for h in body["results"] if "vector" in h["routes"]]
        landed = {(unit_ids[i].file, unit_ids[i].start_line) for i in first}
        assert all((h["file"], h["start_line"]) in landed for h in vector_hits)

        gate.next()
        gate.wait_held()  # second batch
        state = client.get("/repos/prog").json()
        assert state["stages"]["vector"]["done"] == 2 * BATCH and not state["complete"]
        assert len(get_vectors().ids("prog")) == 2 * BATCH, "each batch is published as it lands"
        stop()
        gate.next()
        queue.drain()
    finally:
        gate.release.set()
        if gate in chain._listeners:
            stop()

    state = client.get("/repos/prog").json()
    assert state["status"] == "ready" and state["complete"] is True and state["stages"] == {}
    assert len(get_vectors().ids("prog")) == state["units"]
    body = client.post(
        "/search", json={"query": "OrderService._audit", "repo": "prog", "top_k": 5}
    ).json()
    assert body["routes_missing"] == [] and "vector" in body["routes_ready"]
    assert gate.batches == 2, "released after the second batch: the rest ran unheld"


def test_route_readiness_and_eta_from_stage_state() -> None:
    now = time.time()
    state = {
        "vector": {"done": 40, "total": 100, "started": now - 20},
        "vector2": {"done": 0, "total": None, "started": None},
    }
    routes = ["vector", "vector2", "keyword", "symbol", "exact", "cluster"]
    stages = {s: SpaceProgress(e["done"], e["total"]) for s, e in state.items()}
    assert route_readiness(stages, False, routes) == (
        ["keyword", "symbol", "exact"],
        ["vector", "vector2", "cluster"],
    )
    assert route_readiness(stages, True, routes) == (routes, [])
    eta = eta_seconds(state, False)
    # 60 left in the running space and 100 owed by the next, at about 2 per second
    assert eta is not None and 70 < eta < 90, eta
    assert eta_seconds(state, True) is None
    assert route_readiness({"vector": SpaceProgress(100, 100)}, False, ["vector"]) == (
        ["vector"],
        [],
    )
