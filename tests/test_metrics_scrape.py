"""/metrics behind the API's tokens, and a scrape that does not count every Chroma collection:
two real repositories indexed into embedded Chroma, scraped again and again while every
``Collection.count`` of the real client is counted; the figures still follow a reindex."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from chromadb.api.models.Collection import Collection
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from coderag.settings import get_settings
from coderag_app.server import create_app
from tests.conftest import commit_all, wait_ready

TOKEN = "metrics-reader-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

pytestmark = pytest.mark.slow


def _repo(root: Path, name: str, functions: int) -> Path:
    path = root / name
    path.mkdir(parents=True)
    body = "".join(f"def f{i}(x: int) -> int:\n    return x + {i}\n\n\n" for i in range(functions))
    (path / "mod.py").write_text(body)
    commit_all(git.Repo.init(path), "init")
    return path


def _vectors(text: str) -> dict[tuple[str, str], float]:
    return {
        (s.labels["repo"], s.labels["space"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "coderag_repo_vectors"
    }


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Every ``count`` the real Chroma client answers, by collection name."""
    calls: Counter = Counter()
    real = Collection.count

    def count(self: Collection) -> int:
        calls[self.name] += 1
        return real(self)

    monkeypatch.setattr(Collection, "count", count)
    return calls


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("CODERAG_API_TOKENS", f"reader:{TOKEN}:reader,root:admin-token:admin")
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()
    with TestClient(create_app()) as c:
        yield c


def test_metrics_needs_a_token(client: TestClient) -> None:
    r = client.get("/metrics")
    assert r.status_code == 401 and "Authorization" in r.json()["detail"]
    r = client.get("/metrics", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    r = client.get("/metrics", headers=AUTH)  # a reader's token is enough
    assert r.status_code == 200 and "coderag_repo_units" in r.text


def test_scrape_counts_no_collection_until_its_index_moves(
    client: TestClient, counted: Counter, tmp_path: Path
) -> None:
    admin = {"Authorization": "Bearer admin-token"}
    paths = {
        "alpha": _repo(tmp_path / "repos", "alpha", 3),
        "beta": _repo(tmp_path / "repos", "beta", 5),
    }
    for name, path in paths.items():
        r = client.post("/repos", json={"name": name, "path": str(path)}, headers=admin)
        assert r.status_code == 202, r.text
    states = {name: _ready(client, name, admin) for name in paths}

    first = _vectors(client.get("/metrics", headers=AUTH).text)
    assert first[("alpha", "vector")] == states["alpha"]["units"] == 3
    assert first[("beta", "vector")] == states["beta"]["units"] == 5
    assert first[("alpha", "vector2")] == 0  # the second encoder is off

    counted.clear()
    for _ in range(5):
        assert _vectors(client.get("/metrics", headers=AUTH).text) == first
    assert sum(counted.values()) == 0, counted  # nothing moved: Chroma is not asked

    # alpha grows and is reindexed: only its collection is counted again, and its figure moves
    (paths["alpha"] / "more.py").write_text("def g(y: str) -> str:\n    return y * 2\n")
    commit_all(git.Repo(paths["alpha"]), "more")
    assert client.post("/repos/alpha/reindex", headers=admin).status_code == 202
    grown = _ready(client, "alpha", admin)
    assert grown["units"] == 4
    counted.clear()
    now = _vectors(client.get("/metrics", headers=AUTH).text)
    assert now[("alpha", "vector")] == 4 and now[("beta", "vector")] == 5
    assert counted and all(name.startswith("repo_alpha") for name in counted), counted
    counted.clear()
    assert _vectors(client.get("/metrics", headers=AUTH).text) == now
    assert sum(counted.values()) == 0, counted

    # a deleted repository leaves the figures with its name
    assert client.delete("/repos/beta", headers=admin).status_code == 204
    gone = _vectors(client.get("/metrics", headers=AUTH).text)
    assert ("beta", "vector") not in gone and gone[("alpha", "vector")] == 4


def _ready(client: TestClient, name: str, headers: dict[str, str]) -> dict:
    client.headers.update(headers)
    try:
        body = wait_ready(client, name)
    finally:
        client.headers.pop("Authorization")
    assert body["status"] == "ready", body
    return body
