"""The compose-mode seams: jobs through rq on a real redis-server, vectors in a real
`chroma run` server, the generator reaching the retriever over a transport."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq import Queue, SimpleWorker

from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.settings import get_settings
from coderag.store import get_catalog, get_vectors
from coderag.store.vectors import VectorStore, make_client
from coderag_app.server import create_app
from coderag_embedder.encoder import get_encoder
from coderag_retriever.search import rank

QUEUES = ("parser", "embedder", "retriever")


@pytest.mark.slow
def test_indexing_runs_through_rq_workers(
    redis_url: str, sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    get_settings.cache_clear()
    conn = Redis.from_url(redis_url)
    conn.flushdb()
    with TestClient(create_app(("coderag_parser", "coderag_retriever"))) as client:
        assert client.get("/health").json()["dependencies"]["redis"] == "ok"
        assert (
            client.post("/repos", json={"name": "rq", "path": str(sample_repo)}).status_code == 202
        )
        assert client.get("/repos/rq").json()["status"] == "queued"
        assert Queue("parser", connection=conn).count == 1
        worker = SimpleWorker([Queue(q, connection=conn) for q in QUEUES], connection=conn)
        worker.work(burst=True)
        repo = client.get("/repos/rq").json()
        assert repo["status"] == "ready", repo
        r = client.post("/search", json={"query": "user store cache", "repo": "rq"})
        assert r.json()["results"][0]["symbol"].startswith("UserStore")


@pytest.mark.slow
def test_vectors_in_a_chroma_server(
    chroma_server: str, sample_repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store = VectorStore(make_client(chroma_server, tmp_path))
    assert store.heartbeat()
    store.upsert("t", ["a", "b"], [[1.0, 0.0], [0.0, 1.0]], [{"file": "a"}, {"file": "b"}])
    assert store.query("t", [0.9, 0.1], 2)[0][0] == "a"
    store.delete("t", ["a"])
    assert store.ids("t") == {"b"}
    store.drop("t")
    assert store.count("t") == 0
    monkeypatch.setenv("CODERAG_CHROMA_URL", chroma_server)
    get_settings.cache_clear()
    get_catalog().create_repo("remote", str(sample_repo), None, None)
    run_now(IndexRepo(repo="remote"))
    assert get_vectors().count("remote") == get_catalog().get_repo("remote").units
    assert (
        rank("remote", "NewService constructor", 3, get_settings())[0].unit.symbol == "NewService"
    )
    get_vectors().drop("remote")


def test_generator_reaches_retriever_errors_through_its_client() -> None:
    with TestClient(create_app()) as client:
        r = client.post("/ask", json={"query": "anything", "repo": "missing"})
        assert r.status_code == 404 and "missing" in r.json()["detail"]


def test_reindex_restores_missing_vectors(sample_repo: Path) -> None:
    get_catalog().create_repo("heal", str(sample_repo), None, None)
    run_now(IndexRepo(repo="heal"))
    units = get_catalog().get_repo("heal").units
    get_vectors().drop("heal")  # Chroma's data lost: the count tells the next chain to look
    run_now(IndexRepo(repo="heal"))
    assert get_vectors().count("heal") == units
    unit_ids = {u.id for u in get_catalog().units("heal")}
    get_vectors().delete("heal", [sorted(unit_ids)[0]])
    get_vectors().upsert("heal", ["orphan"], get_encoder().encode(["gone"]), [{"file": "gone.py"}])
    # one lost and one orphan keep the count: what makes the next chain look is the mark an
    # embedder that failed mid-write leaves
    get_catalog().chains.open_vector_chain("heal", "a-chain-that-died")
    run_now(IndexRepo(repo="heal"))
    assert get_vectors().ids("heal") == unit_ids, "the missing vector back, the orphan gone"
