"""The whole pipeline in one process over HTTP: real tree-sitter, the packaged MiniLM encoder,
embedded Chroma, SQLite, the extractive backend. Also every bad input we can think of."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag.store import get_catalog, get_vectors
from coderag_app.server import create_app
from tests.conftest import SAMPLE_LANGUAGES, wait_ready


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        yield c


@pytest.mark.slow
def test_index_search_ask_audit_delete(client: TestClient, sample_repo: Path) -> None:
    r = client.post("/repos", json={"name": "sample", "path": str(sample_repo)})
    assert r.status_code == 202 and r.json() == {"name": "sample", "status": "queued"}
    repo = wait_ready(client, "sample")
    assert repo["status"] == "ready", repo
    sources = len(SAMPLE_LANGUAGES)
    assert repo["files"] == sources + 1 and repo["commit"] and repo["indexed_at"]  # + README
    assert repo["skipped"] >= 2  # the PNG named .py and the latin-1 file
    assert [x["name"] for x in client.get("/repos").json()] == ["sample"]

    r = client.post(
        "/search",
        json={"query": "process an order and validate the user id", "repo": "sample", "top_k": 5},
        headers={"X-User": "ada"},
    )
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results[0]["file"] == "src/go/sample.go"
    assert results[0]["symbol"] == "(*Service).ProcessOrder"
    assert (results[0]["start_line"], results[0]["end_line"]) == (10, 16)
    assert results[0]["language"] == "go" and results[0]["kind"] == "method"
    files = {h["file"] for h in results}
    assert not any(f.startswith(("secret/", "node_modules/")) for f in files)

    r = client.post("/search", json={"query": "用户信息是从哪个接口加载的？", "repo": "sample"})
    assert r.status_code == 200
    assert r.json()["results"][0]["file"] in (
        "src/typescript/sample.ts",
        "src/javascript/sample.js",
    )

    r = client.post("/ask", json={"query": "How is an order created?", "repo": "sample"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["refused"] is False and body["citations"]
    for c in body["citations"]:
        assert f"FILE: {c['file']}:{c['start_line']}-{c['end_line']}" in body["answer"]

    r = client.post("/ask", json={"query": "订单是怎么创建的？", "repo": "sample"})
    # answered in Chinese, with the evidence under its own FILE: anchor
    assert r.status_code == 200 and "依据" in r.json()["answer"] and "FILE: " in r.json()["answer"]

    with client.stream(
        "POST",
        "/ask",
        json={"query": "where are users loaded?", "repo": "sample"},
        headers={"Accept": "text/event-stream"},
    ) as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        raw = "".join(s.iter_text())
    events = [
        block.split("\n", 1)[0].removeprefix("event: ") for block in raw.strip().split("\n\n")
    ]
    assert events[0] == "retrieval" and events[1] == "prompt" and events[-1] == "done"
    assert "token" in events
    done = json.loads(raw.strip().split("\n\n")[-1].split("data: ", 1)[1])
    assert done["citations"] and done["took_ms"] > 0

    r = client.get("/audit/export.csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    # one row per request: each /ask's own retrieval writes none (issue 43)
    assert [row["endpoint"] for row in rows] == ["search", "search", "ask", "ask", "ask"]
    assert rows[0]["user"] == "ada" and rows[1]["user"] == "anonymous"
    assert "src/go/sample.go" in json.loads(rows[0]["retrieved_files"])
    assert int(rows[2]["llm_input_tokens"]) > 0 and float(rows[2]["response_ms"]) > 0
    assert (
        client.get("/audit/export.csv", params={"since": "2999-01-01T00:00:00Z"}).text.count("\n")
        == 1
    )

    health = client.get("/health").json()
    assert health["status"] == "ok" and health["dependencies"]["chroma"] == "ok"

    assert get_vectors().count("sample") == repo["units"]
    assert client.delete("/repos/sample").status_code == 204
    assert get_vectors().count("sample") == 0
    assert client.get("/repos/sample").status_code == 404
    assert client.post("/search", json={"query": "x", "repo": "sample"}).status_code == 404


@pytest.mark.slow
def test_reindex_only_embeds_what_changed(client: TestClient, sample_repo: Path) -> None:
    client.post("/repos", json={"name": "s", "path": str(sample_repo)})
    first = wait_ready(client, "s")
    catalog = get_catalog()
    before = get_vectors().ids("s")
    cached = catalog.db.read("SELECT COUNT(*) FROM embed_cache")[0][0]
    java_ids = {u.id for u in catalog.units("s", ["src/java/Sample.java"])}
    go = sample_repo / "src" / "go" / "sample.go"
    go.write_text(go.read_text().replace('return "orders"', 'return "orders-v2"'))
    (sample_repo / "src" / "java" / "Sample.java").unlink()
    assert client.post("/repos/s/reindex").status_code == 202
    second = wait_ready(client, "s")
    assert second["files"] == first["files"] - 1
    after = get_vectors().ids("s")
    assert java_ids and not java_ids & after
    assert not catalog.units("s", ["src/java/Sample.java"])
    assert before - java_ids == after  # line ranges kept: same unit ids, vectors replaced in place
    assert len(after) == second["units"]
    # only the one edited method was encoded again, once per encoder
    assert catalog.db.read("SELECT COUNT(*) FROM embed_cache")[0][0] == cached + 2
    assert get_vectors().ids("s", "vector2") == after
    hits = client.post("/search", json={"query": "orders-v2 name", "repo": "s"}).json()["results"]
    assert hits[0]["symbol"] == "Service.Name"


def test_bad_input_is_a_clear_4xx(client: TestClient, tmp_path: Path) -> None:
    cases = [
        ("/repos", {"name": "x", "path": str(tmp_path / "missing")}, 400, "does not exist"),
        ("/repos", {"name": "x", "path": str(tmp_path / "f.txt")}, 400, "not a directory"),
        ("/repos", {"name": "bad name!", "path": str(tmp_path)}, 400, "name"),
        ("/repos", {"name": "x"}, 422, "exactly one"),
        ("/repos", {"name": "x", "path": str(tmp_path), "url": "https://x"}, 422, "exactly one"),
        ("/repos", {"name": "x", "url": "ftp://host/repo"}, 400, "git URL"),
        ("/search", {"query": "x", "repo": "nope"}, 404, "no repository"),
        ("/ask", {"query": "x", "repo": "nope"}, 404, "no repository"),
    ]
    (tmp_path / "f.txt").write_text("")
    for path, body, status, words in cases:
        r = client.post(path, json=body)
        assert r.status_code == status, (path, body, r.text)
        assert words in r.json()["detail"], r.json()
    r = client.post("/repos", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    client.post("/repos", json={"name": "empty", "path": str(tmp_path)})
    wait_ready(client, "empty")
    for body, status, words in [
        ({"query": "   ", "repo": "empty"}, 400, "empty"),
        ({"query": "x" * 100_000, "repo": "empty"}, 400, "limit"),
        ({"query": "x", "repo": "empty", "top_k": 0}, 422, "top_k"),
        ({"query": "x", "repo": "empty", "top_k": 10_000}, 400, "limit"),
    ]:
        r = client.post("/search", json=body)
        assert r.status_code == status and words in r.json()["detail"], r.text
    assert client.post("/repos", json={"name": "empty", "path": str(tmp_path)}).status_code == 409
    r = client.post("/ask", json={"query": "where is the payment code?", "repo": "empty"})
    assert r.status_code == 200 and r.json()["refused"] is True
    assert client.get("/audit/export.csv", params={"since": "yesterday"}).status_code == 400
    assert client.delete("/repos/nope").status_code == 404


def test_tokens_guard_every_endpoint_but_health(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coderag.settings import get_settings

    monkeypatch.setenv("CODERAG_API_TOKENS", "ada:secret-1")
    get_settings.cache_clear()
    assert client.get("/repos").status_code == 401
    assert client.get("/repos", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/repos", headers={"Authorization": "Bearer secret-1"}).status_code == 200
    assert client.get("/health").status_code == 200
