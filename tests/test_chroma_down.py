"""A Chroma server that dies mid-test: search, ask and delete answer 503 saying so, never a 500
and never a quietly empty vector route; /health reports it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag_app.server import create_app
from harness.procs import start_chroma
from tests.conftest import wait_ready


@pytest.mark.slow
def test_chroma_down_is_503(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sample_repo = tmp_path / "shop"
    sample_repo.mkdir()
    (sample_repo / "orders.py").write_text(
        'def process_order(order_id: str) -> bool:\n    """Process an order."""\n'
        "    return bool(order_id)\n"
    )
    proc, url = start_chroma(tmp_path / "chroma")
    try:
        monkeypatch.setenv("CODERAG_CHROMA_URL", url)
        monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
        get_settings.cache_clear()
        with TestClient(create_app()) as client:
            client.post("/repos", json={"name": "s", "path": str(sample_repo)})
            assert wait_ready(client, "s")["status"] == "ready"
            query = {"query": "process an order", "repo": "s"}
            r = client.post("/search", json=query)
            assert r.status_code == 200 and r.json()["results"][0]["routes"].get("vector")

            proc.kill()
            proc.wait(10)
            for path in ("/search", "/ask"):
                r = client.post(path, json=query)
                assert r.status_code == 503, (path, r.text)
                assert "Chroma is not reachable" in r.json()["detail"]
            health = client.get("/health").json()
            assert health["status"] == "degraded" and health["dependencies"]["chroma"] != "ok"
            r = client.delete("/repos/s")
            assert r.status_code == 503 and "Chroma" in r.json()["detail"]
            assert client.get("/repos/s").json()["status"] == "ready"  # nothing half-deleted
    finally:
        proc.kill()
        proc.wait(10)
