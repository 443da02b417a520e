"""The whole app on PostgreSQL: with ``CODERAG_DATABASE_URL`` naming a real server, a git
repository is indexed (in-process queue), searched and asked about in a session, the audit log is
exported, and every row lands in PostgreSQL, none in a SQLite file."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import psycopg
import pytest

from coderag.settings import get_settings
from coderag.store import reset_stores
from harness.postgres import Postgres
from tests.conftest import indexed

SOURCES = {
    "shop/orders.py": (
        "def create_order(user_id, items):\n"
        '    """Create an order for a user after checking the items."""\n'
        "    check_items(items)\n"
        "    return {'user': user_id, 'items': items}\n\n\n"
        "def check_items(items):\n"
        '    """Reject an empty order."""\n'
        "    if not items:\n"
        "        raise ValueError('empty order')\n"
    ),
    "shop/users.py": (
        "def load_user(user_id):\n"
        '    """Load a user record by id."""\n'
        "    return {'id': user_id}\n"
    ),
}


def test_index_search_ask_and_audit_on_postgresql(
    tmp_path: Path, data_dir: Path, postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = postgres.create("app")
    monkeypatch.setenv("CODERAG_DATABASE_URL", url)
    get_settings.cache_clear()
    reset_stores()
    with indexed(tmp_path / "shop", "shop", SOURCES) as client:
        repo = client.get("/repos/shop").json()
        assert (repo["files"], repo["complete"]) == (2, True)
        deps = client.get("/health").json()["dependencies"]
        assert deps["postgresql"] == "ok" and "sqlite" not in deps, deps
        r = client.post(
            "/search",
            json={"query": "where is an order created", "repo": "shop", "top_k": 3},
            headers={"X-User": "ada"},
        )
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["symbol"] == "create_order"
        ask = {"query": "How is an order created?", "repo": "shop", "session_id": "s-1"}
        r = client.post("/ask", json=ask, headers={"X-User": "ada"})
        assert r.status_code == 200, r.text
        assert r.json()["citations"][0]["file"] == "shop/orders.py"
        r = client.post("/ask", json={**ask, "query": "and what does it check?"})
        assert r.status_code == 403  # the session belongs to ada
        rows = list(csv.DictReader(io.StringIO(client.get("/audit/export.csv").text)))
        mine = [row for row in rows if row["endpoint"] in ("search", "ask")]
        assert [(row["endpoint"], row["user"], row["status"]) for row in mine] == [
            ("search", "ada", "ok"),
            ("ask", "ada", "ok"),
            ("ask", "anonymous", "error 403"),
        ]
        assert "shop/orders.py" in mine[0]["retrieved_files"]
    with psycopg.connect(url) as conn:
        count = {
            table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("repos", "units", "symbols", "audit", "session_turns", "embed_cache")
        }
    assert count["repos"] == 1 and count["units"] >= 3 and count["symbols"] >= 3
    assert count["audit"] == len(rows) and count["session_turns"] == 2 and count["embed_cache"]
    assert not (data_dir / "coderag.db").exists()
