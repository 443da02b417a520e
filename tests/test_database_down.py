"""The database stopped under a running app: a real PostgreSQL server of the test's own, stopped
mid-test (``pg_ctl stop -m immediate``), then started again. Every route that reads the catalog
answers 503 naming the database, never its address; /health tells an anonymous caller or a reader
ok/down only, and an admin what failed; once the server is back the same app answers again."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag.store import reset_stores
from coderag_app.server import create_app
from harness.postgres import Postgres, binaries
from tests.conftest import _free_port, commit_all, wait_ready

pytestmark = pytest.mark.slow

ADMIN = {"Authorization": "Bearer admin-token"}
READER = {"Authorization": "Bearer reader-token"}


@pytest.fixture
def server() -> Iterator[Postgres]:
    """A PostgreSQL server for this test alone (the session's own must outlive it)."""
    bin_dir = binaries()
    if bin_dir is None:
        pytest.fail("PostgreSQL is not installed (make test installs it)")
    pg = Postgres(bin_dir, _free_port())
    pg.start()
    yield pg
    with contextlib.suppress(RuntimeError):  # stopped by the test already
        pg.stop()


def test_database_down_is_503_and_health_says_only_down(
    server: Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODERAG_DATABASE_URL", server.create("down"))
    monkeypatch.setenv("CODERAG_API_TOKENS", "root:admin-token:admin,rd:reader-token:reader")
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()
    reset_stores()
    repo = tmp_path / "shop"
    repo.mkdir()
    (repo / "orders.py").write_text("def create_order(user: str) -> dict:\n    return {}\n")
    commit_all(git.Repo.init(repo), "init")
    query = {"query": "create an order", "repo": "shop"}
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.post("/repos", json={"name": "shop", "path": str(repo)}, headers=ADMIN)
        assert r.status_code == 202, r.text
        client.headers.update(ADMIN)
        assert wait_ready(client, "shop")["status"] == "ready"
        client.headers.pop("Authorization")
        assert client.post("/search", json=query, headers=READER).status_code == 200
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/health", headers=ADMIN).json()["dependencies"]["postgresql"] == "ok"

        # fast, not immediate: the server runs with synchronous_commit=off, so a crash would
        # lose the last commits (the index's publication among them) and fail the test for
        # a reason no deployment has
        server._run("pg_ctl", "-D", str(server.data), "-m", "fast", "-w", "stop")

        port = str(server.port)
        calls = [
            ("GET", "/repos", READER, None),
            ("GET", "/repos/shop", READER, None),
            ("POST", "/search", READER, query),
            ("POST", "/ask", READER, query),
            ("GET", "/metrics", READER, None),
            ("GET", "/repos/shop/symbols", READER, None),
            ("POST", "/repos/shop/reindex", ADMIN, None),
            ("GET", "/audit/export.csv", ADMIN, None),
        ]
        for method, path, headers, body in calls:
            r = client.request(method, path, json=body, headers=headers)
            assert r.status_code == 503, (path, r.status_code, r.text)
            detail = r.json()["detail"]
            assert "database" in detail and "PostgreSQL" in detail, (path, detail)
            assert port not in detail and "127.0.0.1" not in detail, (path, detail)

        assert client.get("/health").json() == {"status": "down"}
        assert client.get("/health", headers=READER).json() == {"status": "down"}
        admin = client.get("/health", headers=ADMIN).json()
        assert admin["status"] == "degraded"
        assert admin["dependencies"]["postgresql"].startswith("error")
        assert admin["dependencies"]["chroma"] == "ok"

        # back up: the same app answers again, no restart needed
        options = f"-p {server.port} -k {server.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(server.root / "server.log")
        server._run("pg_ctl", "-D", str(server.data), "-l", log, "-o", options, "-w", "start")
        assert client.get("/repos", headers=READER).status_code == 200
        r = client.post("/search", json=query, headers=READER)
        assert r.status_code == 200, r.text
        assert client.get("/health").json() == {"status": "ok"}
