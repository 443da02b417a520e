"""A deleted repository's code is never served again: each registration has its own id, and the
retriever's cache, the vector collections and every job write are keyed by it."""

from __future__ import annotations

from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq import Queue, SimpleWorker

from coderag.settings import get_settings
from coderag.store import get_catalog, get_vectors
from coderag_app.server import create_app
from tests.conftest import commit_all, wait_ready

OLD = "def legacy_payment_gateway(card):\n    return charge_card_through_legacy_gateway(card)\n"
NEW = "def modern_invoice_builder(order):\n    return build_invoice_lines(order)\n"


@pytest.fixture(autouse=True)
def one_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """One encoder is enough here; the second would only double the time."""
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()


def make_repo(root: Path, text: str) -> Path:
    """A one-file git repository whose app.py holds ``text``."""
    root.mkdir()
    (root / "app.py").write_text(text)
    commit_all(git.Repo.init(root), "only commit")
    return root


def searched_text(client: TestClient, query: str) -> str:
    """Symbols and code of every /search hit, joined."""
    r = client.post("/search", json={"query": query, "repo": "same", "top_k": 20})
    assert r.status_code == 200, r.text
    return "\n".join(f"{h['symbol']}\n{h.get('text') or ''}" for h in r.json()["results"])


def test_a_re_created_repository_serves_only_its_new_code(tmp_path: Path) -> None:
    old, new = make_repo(tmp_path / "old", OLD), make_repo(tmp_path / "new", NEW)
    with TestClient(create_app()) as client:
        assert client.post("/repos", json={"name": "same", "path": str(old)}).status_code == 202
        assert wait_ready(client, "same")["status"] == "ready"
        assert "legacy_payment_gateway" in searched_text(client, "legacy payment gateway")
        first = get_catalog().registration("same")
        assert client.delete("/repos/same").status_code == 204

        assert client.post("/repos", json={"name": "same", "path": str(new)}).status_code == 202
        assert wait_ready(client, "same")["status"] == "ready"
        assert get_catalog().registration("same") != first
        for query in ("legacy payment gateway", "modern invoice builder", "charge card"):
            assert "legacy" not in searched_text(client, query), query
        assert "modern_invoice_builder" in searched_text(client, "modern invoice builder")
        assert get_vectors().ids("same") == get_catalog().unit_ids("same")


@pytest.mark.slow
def test_a_job_of_a_deleted_repository_never_writes_into_its_successor(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    get_settings.cache_clear()
    conn = Redis.from_url(redis_url)
    conn.flushdb()
    queues = {q: Queue(q, connection=conn) for q in ("parser", "embedder", "retriever")}

    def work(*names: str) -> None:
        SimpleWorker([queues[n] for n in names], connection=conn).work(burst=True)

    old, new = make_repo(tmp_path / "old", OLD), make_repo(tmp_path / "new", NEW)
    with TestClient(create_app(("coderag_parser", "coderag_retriever"))) as client:
        client.post("/repos", json={"name": "same", "path": str(old)})
        work("parser")  # the old registration's embed job now waits in the embedder queue
        assert queues["embedder"].count == 1
        assert client.delete("/repos/same").status_code == 204
        client.post("/repos", json={"name": "same", "path": str(new)})

        work("embedder", "retriever")  # the stale embed job runs before the new parse
        repo = client.get("/repos/same").json()
        assert repo["status"] == "queued" and repo["commit"] is None, repo
        assert get_vectors().count("same") == 0

        work("parser", "embedder", "retriever")
        repo = client.get("/repos/same").json()
        assert repo["status"] == "ready", repo
        assert repo["commit"] == git.Repo(new).head.commit.hexsha
        assert "legacy" not in searched_text(client, "legacy payment gateway")
        assert get_vectors().ids("same") == get_catalog().unit_ids("same")
        names = [c.name for c in get_vectors().client.list_collections()]
        assert len([n for n in names if n.startswith("repo_same")]) == 1, names
