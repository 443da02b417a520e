"""A Chroma server that dies mid-test: search, ask and delete answer 503 saying so, never a 500
and never a quietly empty vector route; /health reports it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag_app.server import create_app
from tests.conftest import _free_port, wait_ready


def _start_chroma(path: Path) -> tuple[subprocess.Popen, str]:
    binary = shutil.which("chroma") or str(Path(os.sys.executable).parent / "chroma")
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/api/v2/heartbeat", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    pytest.fail("chroma run did not start")


@pytest.mark.slow
def test_chroma_down_is_503(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sample_repo = tmp_path / "shop"
    sample_repo.mkdir()
    (sample_repo / "orders.py").write_text(
        'def process_order(order_id: str) -> bool:\n    """Process an order."""\n'
        "    return bool(order_id)\n"
    )
    proc, url = _start_chroma(tmp_path / "chroma")
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
