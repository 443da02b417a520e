"""/ask while a repository's vectors are still being written, through the real app and models:
it answers from the routes that are ready, says which are missing (field and a last line of the
answer), still refuses a question the code does not answer, and drops the note once complete.
The embedding job is held at its first vector batch, so every check is of a known state."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag import chain
from coderag.settings import Settings, get_settings
from coderag_app.server import create_app
from coderag_embedder import tasks as embed_tasks
from coderag_retriever import relevance
from tests.conftest import wait_ready

WAIT_S = 600
"""Deadlock guard on a loaded machine, not a timing assertion."""


class Hold:
    """Holds the embedder lane at its first vector batch until released."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, repo: str, stage: str, done: int, total: int) -> None:
        if stage.startswith("embedding") and threading.current_thread().name == "coderag-embedder":
            self.held.set()
            assert self.release.wait(WAIT_S), "the test never released the batch"


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The whole app in-process with the default encoders, small vector batches."""
    get_settings.cache_clear()
    monkeypatch.setattr(embed_tasks, "CHUNK_UNITS", 4)
    with TestClient(create_app()) as c:
        yield c


@pytest.mark.slow
def test_ask_answers_from_ready_routes_while_vectors_are_written(
    client: TestClient, sample_repo: Path
) -> None:
    hold = Hold()
    stop = chain.listen(hold)
    try:
        r = client.post("/repos", json={"name": "s", "path": str(sample_repo)})
        assert r.status_code == 202, r.text
        assert hold.held.wait(WAIT_S), "no vector batch was reported"
        state = client.get("/repos/s").json()
        assert state["status"] == "ready" and state["complete"] is False, state

        r = client.post("/ask", json={"query": "How is an order created?", "repo": "s"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["refused"] is False, body
        assert body["citations"], body
        assert {"vector", "vector2"} <= set(body["routes_missing"]), body
        assert body["answer"].splitlines()[-1].startswith("The index is still writing vectors")

        zh = client.post("/ask", json={"query": "订单是怎么创建的？", "repo": "s"}).json()
        assert zh["refused"] is False and zh["citations"], zh
        assert zh["answer"].splitlines()[-1].startswith("索引仍在写入向量"), zh

        absent = client.post(
            "/ask", json={"query": "Where is the GraphQL schema stitched together?", "repo": "s"}
        ).json()
        assert absent["refused"] is True and absent["citations"] == [], absent
        assert absent["routes_missing"], absent
    finally:
        hold.release.set()
        stop()
    assert wait_ready(client, "s", timeout=WAIT_S)["complete"] is True
    done = client.post("/ask", json={"query": "How is an order created?", "repo": "s"}).json()
    assert done["routes_missing"] == [] and "still writing" not in done["answer"], done


def test_the_lexical_rule_applies_only_while_vectors_are_missing() -> None:
    s = Settings()
    full, lexical = relevance.model_for(s), relevance.model_for(s, lexical=True)
    assert full is not None and lexical is not None
    assert full.encoder == lexical.encoder == s.embed_model_2
    assert full != lexical
    assert relevance.model_for(s.model_copy(update={"score_gate": 0.5}), lexical=True) is None
