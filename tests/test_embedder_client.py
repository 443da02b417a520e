"""The retriever's seam to the embedder (issue 11): query vectors from the embedder over real HTTP
(its app served by uvicorn on a loopback port) give the same ranking as in-process; the caller's
token travels along; a query over HTTP never waits for an indexing batch; unit vectors come from
Chroma (embedded or a `chroma run` server), checked against the units' content hashes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from coderag import embedding
from coderag.errors import Unavailable
from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.settings import get_settings
from coderag.store import get_catalog, get_vectors
from coderag_app.server import create_app
from coderag_embedder.encoder import get_encoders, unit_text
from coderag_embedder.queries import local
from coderag_retriever.index import get_index_cache, load_vectors
from coderag_retriever.search import rank
from tests.conftest import _free_port
from tests.test_responsive import WAIT_S, finished, in_thread, index_call, wrap
from tests.test_retriever import CHAIN
from tests.tinymodels import build_tiny_roberta

QUESTIONS = ("where are orders created", "订单在哪里创建？", "how is a user fetched from the cache")
"""English, Chinese and a second English question over the sample repository."""


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """Serve an app with uvicorn on a free loopback port in a thread; yields its base URL."""
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)


@contextmanager
def embedder_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The embedder alone on a loopback port, and this process pointed at it with no
    in-process embedder left (so nothing can quietly fall back to one)."""
    with served(create_app(("coderag_embedder",))) as url:
        embedding.use_local(None)
        monkeypatch.setenv("CODERAG_EMBEDDER_URL", url)
        get_settings.cache_clear()
        try:
            yield url
        finally:
            embedding.use_local(local())
            monkeypatch.delenv("CODERAG_EMBEDDER_URL")
            get_settings.cache_clear()


def _index(root: Path, name: str = "shop") -> None:
    get_catalog().create_repo(name, str(root), None, None)
    run_now(IndexRepo(repo=name))
    assert get_catalog().get_repo(name).status == "ready"


def _ranking(name: str, question: str) -> list[tuple[str, float | None]]:
    return [(r.unit.id, r.similarity) for r in rank(name, question, 5, get_settings())]


@pytest.mark.slow
def test_search_over_http_to_the_embedder_matches_in_process(
    sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _index(sample_repo)
    local_vectors = {s: local().embed_queries(s, list(QUESTIONS)) for s in ("vector", "vector2")}
    in_process = {q: _ranking("shop", q) for q in QUESTIONS}
    assert all(in_process.values())
    with embedder_service(monkeypatch) as url:
        client = embedding.query_embedder()
        assert isinstance(client, embedding.HttpEmbedder) and str(client.http.base_url) == url
        assert client.spaces() == ["vector", "vector2"]
        for space, expected in local_vectors.items():
            got = client.embed_queries(space, list(QUESTIONS))
            np.testing.assert_allclose(got, expected, atol=1e-6)
        for question, expected in in_process.items():
            over_http = _ranking("shop", question)
            assert [u for u, _ in over_http] == [u for u, _ in expected], question
            assert [s for _, s in over_http] == pytest.approx([s for _, s in expected], abs=1e-5)


@pytest.mark.slow
def test_a_retriever_alone_asks_the_embedder_with_the_callers_token(
    sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compose split in one process: a retriever-only app whose queries go to the embedder
    service over HTTP, with the caller's token (the embedder refuses a request without one)."""
    _index(sample_repo)
    query = {"query": QUESTIONS[0], "repo": "shop", "top_k": 5}
    with TestClient(create_app()) as whole:
        expected = whole.post("/search", json=query).json()["results"]
    monkeypatch.setenv("CODERAG_API_TOKENS", "ada:tok-ada:reader")
    get_settings.cache_clear()
    with embedder_service(monkeypatch) as url:
        import httpx

        assert httpx.post(url + "/embed", json={"texts": ["x"]}).status_code == 401
        with TestClient(create_app(("coderag_retriever",))) as retriever:
            auth = {"Authorization": "Bearer tok-ada"}
            r = retriever.post("/search", json=query, headers=auth)
            assert r.status_code == 200, r.text
            got = r.json()["results"]
            assert [(h["file"], h["start_line"]) for h in got] == [
                (h["file"], h["start_line"]) for h in expected
            ]
            assert retriever.post("/search", json=query).status_code == 401
    # the embedder gone: a clear 503 naming it, never a 500
    monkeypatch.setenv("CODERAG_EMBEDDER_URL", f"http://127.0.0.1:{_free_port()}")
    get_settings.cache_clear()
    embedding.use_local(None)
    try:
        with TestClient(create_app(("coderag_retriever",))) as retriever:
            r = retriever.post("/search", json=query, headers={"Authorization": "Bearer tok-ada"})
        assert r.status_code == 503 and "embedder unreachable" in r.json()["detail"]
    finally:
        embedding.use_local(local())


def test_the_cross_encoder_reranks_in_the_embedder_over_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from transformers import RobertaConfig, RobertaForSequenceClassification

    model = build_tiny_roberta(tmp_path / "ce")
    torch.manual_seed(0)
    RobertaForSequenceClassification(
        RobertaConfig.from_pretrained(model, num_labels=1)
    ).save_pretrained(model)
    root = tmp_path / "chain"
    root.mkdir()
    for rel, text in CHAIN.items():
        (root / rel).write_text(text)
    _index(root, "rr")
    plain = [r.unit.id for r in rank("rr", "send a request", 5, get_settings())]
    monkeypatch.setenv("CODERAG_RERANK_MODEL", str(model))
    get_settings.cache_clear()
    in_process = [r.unit.id for r in rank("rr", "send a request", 5, get_settings())]
    assert in_process != plain, "a reranker that changes nothing proves nothing"
    with embedder_service(monkeypatch):
        assert [r.unit.id for r in rank("rr", "send a request", 5, get_settings())] == in_process
        other = get_settings().model_copy(update={"rerank_model": str(tmp_path / "elsewhere")})
        with pytest.raises(Unavailable, match="CODERAG_RERANK_MODEL alike"):
            rank("rr", "send a request", 5, other)


def test_embed_route_encodes_queries_and_passages_per_space(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoders = get_encoders()
    text = "def create_order(user, items): return save(user, items)"
    with TestClient(create_app(("coderag_embedder",))) as client:
        spaces = client.get("/embed/spaces").json()["spaces"]
        assert [(s["name"], s["dim"]) for s in spaces] == [(n, e.dim) for n, e in encoders.items()]
        for space, enc in encoders.items():
            for kind, expected in (
                ("query", enc.encode_query([text])),
                ("passage", enc.encode([text])),
            ):
                body = client.post("/embed", json={"texts": [text], "space": space, "kind": kind})
                assert body.status_code == 200, body.text
                assert body.json()["model"] == enc.name and body.json()["kind"] == kind
                np.testing.assert_allclose(body.json()["vectors"], expected, atol=1e-6)
        # e5 reads "query: " and "passage: " differently: the kind matters in vector2
        q, p = (
            client.post("/embed", json={"texts": [text], "space": "vector2", "kind": k}).json()
            for k in ("query", "passage")
        )
        assert not np.allclose(q["vectors"], p["vectors"], atol=1e-3)
        r = client.post("/embed", json={"texts": [text], "kind": "question"})
        assert r.status_code == 422 and "kind" in r.json()["detail"]
        r = client.post("/embed/rerank", json={"query": "q", "texts": ["t"]})
        assert r.status_code == 409 and "CODERAG_RERANK_MODEL" in r.json()["detail"]
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()
    with TestClient(create_app(("coderag_embedder",))) as client:
        r = client.post("/embed", json={"texts": [text], "space": "vector2", "kind": "query"})
        assert r.status_code == 404 and "CODERAG_EMBED_MODEL_2" in r.json()["detail"]


@pytest.mark.slow
def test_a_query_over_http_never_waits_for_an_indexing_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoders = get_encoders()
    idle = {s: e.encode_query([QUESTIONS[0]])[0] for s, e in encoders.items()}
    with embedder_service(monkeypatch):
        client = embedding.query_embedder()
        for enc in encoders.values():
            held, released = threading.Event(), threading.Event()

            def hold(held: threading.Event = held, released: threading.Event = released) -> None:
                if not held.is_set():
                    held.set()
                    assert released.wait(WAIT_S)

            with monkeypatch.context() as m:
                wrap(m, index_call(enc), "indexer", hold)
                texts = [f"def handler_{i}(order):\n    return order.total\n" for i in range(3)]
                indexer = in_thread("indexer", lambda enc=enc, texts=texts: enc.encode(texts))
                assert held.wait(WAIT_S), "indexing never reached a batch"
                for other in encoders:
                    got = client.embed_queries(other, [QUESTIONS[0]])
                    assert held.is_set() and not released.is_set()  # the batch still runs
                    np.testing.assert_allclose(got[0], idle[other], atol=1e-5)
                released.set()
                assert finished(*indexer).shape == (3, enc.dim)


def _stored(name: str, space: str) -> dict[str, Any]:
    ids = sorted(get_catalog().unit_ids(name))
    return get_vectors().embeddings(name, ids, space)


def _check_vectors_come_from_the_store(name: str) -> None:
    """Every unit's row is its stored vector, which is its unit text under the encoder."""
    index = get_index_cache().get(get_catalog(), name)
    encoders = get_encoders()
    for space, enc in encoders.items():
        vectors = index.vectors(space)
        stored = _stored(name, space)
        assert vectors.shape == (len(index), enc.dim) and len(stored) == len(index)
        for pos, unit in enumerate(index.units):
            vector, content_hash = stored[unit.id]
            assert content_hash == unit.content_hash
            np.testing.assert_allclose(vectors[pos], vector, atol=1e-6)
        some = index.units[:3]
        np.testing.assert_allclose(vectors[:3], enc.encode([unit_text(u) for u in some]), atol=1e-4)


def test_unit_vectors_come_from_chroma_checked_by_content_hash(sample_repo: Path) -> None:
    _index(sample_repo)
    _check_vectors_come_from_the_store("shop")
    units = get_catalog().units("shop")
    fresh = load_vectors(units)
    assert np.all(np.linalg.norm(fresh, axis=1) > 0.99)
    # a vector left over from an older text of the unit (its hash differs) is not used
    stale = units[0]
    get_vectors().upsert(
        "shop", [stale.id], [fresh[1]], [{"file": stale.file, "content_hash": "an older text"}]
    )
    again = load_vectors(units)
    assert not again[0].any() and np.array_equal(again[1:], fresh[1:])
    get_vectors().delete("shop", [units[1].id])
    assert not load_vectors(units)[1].any()
    assert load_vectors([]).shape == (0, 0)


@pytest.mark.slow
def test_unit_vectors_and_search_with_a_chroma_server(
    chroma_server: str, sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODERAG_CHROMA_URL", chroma_server)
    get_settings.cache_clear()
    _index(sample_repo, "served")
    _check_vectors_come_from_the_store("served")
    # MMR reads the unit vectors: a diverse top 5 over the server's vectors, queries over HTTP
    diverse = get_settings().model_copy(update={"mmr_lambda": 0.5})
    plain = rank("served", QUESTIONS[0], 5, diverse)
    assert plain and plain[0].similarity is not None
    with embedder_service(monkeypatch):
        over_http = rank("served", QUESTIONS[0], 5, diverse)
    assert [r.unit.id for r in over_http] == [r.unit.id for r in plain]
