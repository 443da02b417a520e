"""``coderag copy-database``: a data directory indexed on the embedded SQLite file (catalog, audit
log, a session) moves into a real PostgreSQL database row for row, and the app started on
PostgreSQL answers from it at once, without indexing again; bad targets are refused with what to
fix, and nothing is written."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag.store import reset_stores
from coderag.store.database import Database
from coderag.store.migrate import tables
from coderag_app.cli import main
from coderag_app.server import create_app
from tests.conftest import indexed
from tests.postgres import Postgres
from tests.test_postgres_app import SOURCES

ASK = {"query": "How is an order created?", "repo": "shop", "session_id": "s-1"}
"""A question in a session, whose owner must survive the move."""


def rows(db: Database) -> dict[str, list[tuple]]:
    """Every table's rows, sorted, as comparable tuples."""
    out = {}
    for table in tables(db.engine):
        got = db.read(f'SELECT * FROM "{table.name}"')
        out[table.name] = sorted(
            (tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in got),
            key=repr,
        )
    return out


def test_an_index_on_sqlite_moves_to_postgresql_and_answers_without_indexing_again(
    tmp_path: Path,
    data_dir: Path,
    postgres: Postgres,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with indexed(tmp_path / "shop", "shop", SOURCES) as client:
        headers = {"X-User": "ada"}
        found = client.post("/search", json={"query": "order", "repo": "shop"}, headers=headers)
        assert found.status_code == 200, found.text
        assert client.post("/ask", json=ASK, headers=headers).status_code == 200
    reset_stores()
    url = postgres.create("moved")
    assert main(["copy-database", "--to", url, "--json"]) == 0
    copied = capsys.readouterr().out
    sqlite, pg = Database(data_dir / "coderag.db"), Database(url)
    try:
        before, after = rows(sqlite), rows(pg)
    finally:
        sqlite.close()
        pg.close()
    assert after == before
    assert before["units"] and before["audit"] and before["session_turns"] and before["embed_cache"]
    assert f'"units": {len(before["units"])}' in copied

    monkeypatch.setenv("CODERAG_DATABASE_URL", url)
    get_settings.cache_clear()
    reset_stores()
    (data_dir / "coderag.db").rename(data_dir / "moved-away.db")
    with TestClient(create_app()) as client:
        repo = client.get("/repos/shop").json()
        assert (repo["status"], repo["complete"], repo["files"]) == ("ready", True, 2)
        hits = client.post("/search", json={"query": "where is an order created", "repo": "shop"})
        assert hits.json()["results"][0]["symbol"] == "create_order", hits.text
        follow = {**ASK, "query": "and what does it check?"}
        assert client.post("/ask", json=follow).status_code == 403  # still ada's session
        assert client.post("/ask", json=follow, headers=headers).status_code == 200
        audit = list(csv.DictReader(io.StringIO(client.get("/audit/export.csv").text)))
    old = {row[0] for row in before["audit"]}
    new = [int(r["id"]) for r in audit if int(r["id"]) not in old]
    assert len(new) >= 3 and min(new) > max(old), audit  # the identity went on past the copy
    assert not (data_dir / "coderag.db").exists(), "the app ran on PostgreSQL"
    with psycopg.connect(url) as conn:
        turns = conn.execute("SELECT count(*) FROM session_turns").fetchone()
    assert turns == (len(before["session_turns"]) + 2,)


def test_a_copy_is_refused_with_what_to_fix_and_writes_nothing(
    tmp_path: Path, data_dir: Path, postgres: Postgres, capsys: pytest.CaptureFixture[str]
) -> None:
    with indexed(tmp_path / "shop", "shop", SOURCES):
        pass
    reset_stores()
    url = postgres.create("twice")
    assert main(["copy-database", "--to", url]) == 0
    capsys.readouterr()
    empty = postgres.create("empty")
    cases = [
        (["--to", url], "already holds"),  # the target is not empty
        (["--to", "postgresql"], "takes a database URL"),
        (["--to", "mysql://u@127.0.0.1/x"], "SQLite or PostgreSQL"),
        (["--to", "postgresql://u@host:port/x"], "is not a database URL"),
        (["--to", "://x"], "is not a database URL"),
        (["--to", "postgresql://coderag@127.0.0.1:1/x"], "cannot open"),
        (["--from", str(tmp_path / "none.db"), "--to", empty], "no database file"),
        (["--to", f"sqlite:///{data_dir / 'coderag.db'}"], "the same database"),
    ]
    for args, message in cases:
        assert main(["copy-database", *args]) == 2, args
        assert message in capsys.readouterr().err, args
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM repos").fetchone() == (1,)
    with psycopg.connect(empty) as conn:
        made = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema='public'"
        ).fetchone()
    assert made == (0,), "a refused copy leaves the target as it was"
