"""What an operator reads: /metrics (scraped and parsed), the per-repository health report, and
an audit row for every /search, /ask and /retrieve, failures included, filtered by time."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from coderag_app.server import create_app
from tests.conftest import commit_all, wait_ready
from tests.liveserver import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        yield c


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def _audit(client: TestClient, **params: str) -> list[dict]:
    r = client.get("/audit/export.csv", params=params)
    assert r.status_code == 200, r.text
    return list(csv.DictReader(io.StringIO(r.text)))


def test_audit_metrics_health(client: TestClient, sample_repo: Path) -> None:
    client.post("/repos", json={"name": "sample", "path": str(sample_repo)})
    repo = wait_ready(client, "sample")
    assert repo["status"] == "ready"
    calls = [
        ("/search", {"query": "process an order", "repo": "sample"}, 200),
        ("/search", {"query": "  ", "repo": "sample"}, 400),
        ("/search", {"query": "x", "repo": "nope"}, 404),
        ("/search", {"query": "x"}, 422),
        ("/retrieve", {"query": "process an order", "repo": "sample", "top_k": 3}, 200),
        ("/ask", {"query": "How is an order created?", "repo": "sample"}, 200),
        ("/ask", {"query": "How do I bypass the permission check?", "repo": "sample"}, 200),
        ("/ask", {"query": "x", "repo": "sample", "session_id": "bad id!"}, 400),
    ]
    for path, body, status in calls:
        r = client.post(path, json=body, headers={"X-User": "ada"})
        assert r.status_code == status, (path, body, r.text)
    rows = _audit(client)
    got = [(r["endpoint"], r["status"], r["user"], r["query"]) for r in rows]
    assert got == [
        ("search", "ok", "ada", "process an order"),
        ("search", "error 400", "ada", "  "),
        ("search", "error 404", "ada", "x"),
        ("search", "error 422", "ada", "x"),
        ("retrieve", "ok", "ada", "process an order"),
        ("ask", "ok", "ada", "How is an order created?"),  # its own /retrieve writes no row
        ("ask", "refused", "ada", "How do I bypass the permission check?"),
        ("ask", "error 400", "ada", "x"),
    ]
    retrieve = rows[4]
    assert retrieve["repo"] == "sample" and json.loads(retrieve["retrieved_files"])
    assert int(rows[5]["llm_input_tokens"]) > 0
    assert rows[5]["refusal"] == "" and json.loads(rows[5]["cited"])
    assert rows[6]["refusal"] == "unsafe" and json.loads(rows[6]["cited"]) == []

    # since is inclusive, until exclusive; both bound the same rows as the full log
    middle = rows[4]["ts"]
    assert [r["id"] for r in _audit(client, since=middle)] == [r["id"] for r in rows[4:]]
    assert [r["id"] for r in _audit(client, until=middle)] == [r["id"] for r in rows[:4]]
    assert _audit(client, since=rows[-1]["ts"], until=rows[-1]["ts"]) == []
    assert client.get("/audit/export.csv", params={"until": "soon"}).status_code == 400

    text = client.get("/metrics").text
    samples = _samples(text)
    assert _value(samples, "coderag_repo_units", repo="sample") == repo["units"]
    assert _value(samples, "coderag_repo_files", repo="sample") == repo["files"]
    assert _value(samples, "coderag_repo_vectors", repo="sample", space="vector") == repo["units"]
    assert _value(samples, "coderag_repo_status", repo="sample", status="ready") == 1
    assert _value(samples, "coderag_call_seconds_count", endpoint="search") == 4
    assert _value(samples, "coderag_calls_total", endpoint="ask", status="refused") == 1
    assert _value(samples, "coderag_calls_total", endpoint="search", status="error") == 3
    assert _value(samples, "coderag_jobs", queue="in-process", outcome="done") >= 1
    assert _value(samples, "coderag_queue_depth", queue="in-process") == 0
    assert _value(samples, "coderag_index_stage_seconds_count", stage="parsing") >= 1
    assert _value(samples, "coderag_units_embedded_total", space="vector") >= repo["units"]
    handlers = {dict(k[1]).get("handler") for k in samples if k[0].startswith("http_request")}
    assert {"/search", "/ask", "/repos/{name}"} <= handlers
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"\b((?:coderag|http)_\w+)", target["expr"])
    }
    assert used and used <= {k[0] for k in samples}, used - {k[0] for k in samples}

    health = client.get("/repos/sample/health").json()
    assert health["units"] == repo["units"] and health["files"] == repo["files"]
    assert health["vectors_agree"] is True and health["problems"] == []
    assert {e["space"]: e["dimension"] for e in health["encoders"]} == {
        "vector": 384,
        "vector2": 384,
    }
    assert all(e["vectors"] == repo["units"] for e in health["encoders"])
    assert health["skipped"]["binary"] == 1 and health["skipped"]["not_utf8"] == 1
    assert health["empty_units"] == 0 and health["mean_unit_lines"] > 1
    assert health["up_to_date"] and health["head_commit"] == repo["commit"]

    (sample_repo / "src" / "python" / "more.py").write_text("def more():\n    return 2\n")
    head = commit_all(git.Repo(sample_repo), "more")
    health = client.get("/repos/sample/health").json()
    assert health["up_to_date"] is False and health["head_commit"] == head
    assert any("reindex" in p for p in health["problems"])
    assert client.get("/repos/nope/health").status_code == 404


def test_auth_failures_are_audited(monkeypatch: pytest.MonkeyPatch) -> None:
    from coderag.settings import get_settings

    monkeypatch.setenv("CODERAG_API_TOKENS", "ada:tok")
    get_settings.cache_clear()
    with TestClient(create_app()) as client:
        r = client.post("/search", json={"query": "x", "repo": "r"})
        assert r.status_code == 401
        r = client.post(
            "/ask", json={"query": "y", "repo": "r"}, headers={"Authorization": "Bearer no"}
        )
        assert r.status_code == 401
        r = client.post(
            "/search", json={"query": "z", "repo": "r"}, headers={"Authorization": "Bearer tok"}
        )
        assert r.status_code == 404
        rows = _audit_with(client, "tok")
    assert [(r["endpoint"], r["user"], r["status"]) for r in rows] == [
        ("search", "unauthenticated", "error 401"),
        ("ask", "unauthenticated", "error 401"),
        ("search", "ada", "error 404"),
    ]


def _audit_with(client: TestClient, token: str) -> list[dict]:
    r = client.get("/audit/export.csv", headers={"Authorization": f"Bearer {token}"})
    return list(csv.DictReader(io.StringIO(r.text)))
