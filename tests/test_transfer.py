"""``coderag copy-database``: a data directory indexed on the embedded SQLite file (catalog, audit
log, a session) moves into a real PostgreSQL database row for row, and the app started on
PostgreSQL answers from it at once, without indexing again; bad targets are refused with what to
fix, and nothing is written."""

from __future__ import annotations

import contextlib
import csv
import io
import sqlite3
import subprocess
import sys
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
from harness.postgres import Postgres
from harness.procs import worker_env
from tests.conftest import indexed
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


def cli(*args: str) -> tuple[int, str]:
    """``coderag copy-database ARGS`` as a real process (a traceback would be printed, not
    raised); its exit code and stderr."""
    code = "import sys; from coderag_app.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, "copy-database", *args],
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stderr


def pg_tables(url: str) -> list[tuple[str, int]]:
    """Every table and view of a PostgreSQL database outside the system schemas, with its rows
    counted (how the tests see that nothing was written)."""
    with psycopg.connect(url) as conn:
        names = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2"
        ).fetchall()
        return [
            (
                f"{schema}.{name}",
                conn.execute(f'SELECT count(*) FROM "{schema}"."{name}"').fetchone()[0],
            )
            for schema, name in names
        ]


def files(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` with its bytes."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.slow
def test_a_copy_is_refused_with_what_to_fix_and_writes_nothing(
    tmp_path: Path, data_dir: Path, postgres: Postgres
) -> None:
    with indexed(tmp_path / "shop", "shop", SOURCES):
        pass
    reset_stores()
    url = postgres.create("twice")
    assert cli("--to", url) == (0, "")
    empty = postgres.create("empty")
    # another application's database: its own Alembic revision and tables, one with rows
    other = postgres.create("other")
    with psycopg.connect(other) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('9f3e0c1d2b7a')")
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text)")
        conn.execute("INSERT INTO customers VALUES (1, 'ada')")
        conn.execute("CREATE TABLE invoices (id int PRIMARY KEY)")  # no rows
    bare = postgres.create("bare")  # a table, no rows, no Alembic
    with psycopg.connect(bare) as conn:
        conn.execute("CREATE TABLE notes (id int)")
    # files that are not empty SQLite catalogs: another application's SQLite file, and a text
    # file (what sqlite:////etc/passwd names) copied here, so no test can touch /etc
    sqlite_dir = tmp_path / "targets"
    sqlite_dir.mkdir()
    with contextlib.closing(sqlite3.connect(sqlite_dir / "theirs.db")) as conn:
        conn.execute("CREATE TABLE customers (id integer primary key, name text)")
        conn.execute("INSERT INTO customers VALUES (1, 'ada')")
        conn.commit()
    (sqlite_dir / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    sqlite_before = files(sqlite_dir)
    watched = {u: pg_tables(u) for u in (url, empty, other, bare)}
    assert watched[empty] == [] and len(watched[url]) > 10

    on_empty = empty.replace("postgresql://", "postgresql+{}://")
    cases = [
        (["--to", url], "not empty"),  # a catalog already
        (["--to", other], "not empty (it holds alembic_version, customers, invoices)"),
        (["--to", bare], "not empty (it holds notes)"),
        (["--to", on_empty.format("asyncpg")], "without +asyncpg"),
        (["--to", on_empty.format("psycopg2")], "without +psycopg2"),
        (["--to", empty + "?connect_timeout=abc"], "connect_timeout"),
        (["--to", "sqlite://"], "in memory"),
        (["--to", "sqlite:///:memory:"], "in memory"),
        (["--to", f"sqlite:///{sqlite_dir / 'passwd'}"], "is not a SQLite database"),
        (["--to", f"sqlite:///{sqlite_dir / 'theirs.db'}"], "not empty (it holds customers)"),
        (["--to", f"sqlite:///{sqlite_dir / 'no' / 'such.db'}"], "there is no folder"),
        (["--to", "postgresql"], "takes a database URL"),
        (["--to", "mysql://u@127.0.0.1/x"], "SQLite or PostgreSQL"),
        (["--to", "postgresql://u@host:port/x"], "is not a database URL"),
        (["--to", "://x"], "is not a database URL"),
        (["--to", "postgresql://coderag:s3cret@127.0.0.1:1/x"], "cannot open"),
        (["--from", str(tmp_path / "none.db"), "--to", empty], "no database file"),
        (["--from", "sqlite://", "--to", empty], "in memory"),
        (["--to", f"sqlite:///{data_dir / 'coderag.db'}"], "the same database"),
    ]
    for args, message in cases:
        code, err = cli(*args)
        assert (code, len(err.splitlines())) == (2, 1), (args, err)
        assert err.startswith("error: ") and message in err, (args, err)
        assert "Traceback" not in err and "s3cret" not in err, (args, err)
        assert {u: pg_tables(u) for u in watched} == watched, args
        assert files(sqlite_dir) == sqlite_before, args


def test_a_copy_that_fails_half_way_leaves_the_target_empty(
    tmp_path: Path, data_dir: Path, postgres: Postgres
) -> None:
    """The schema and the rows go in one transaction: a row PostgreSQL cannot store (a NUL in a
    text column, which SQLite keeps) fails the copy after the migrations ran, and takes them back
    too."""
    with indexed(tmp_path / "shop", "shop", SOURCES):
        pass
    reset_stores()
    source = tmp_path / "nul.db"
    with (
        contextlib.closing(sqlite3.connect(data_dir / "coderag.db")) as indexed_db,
        contextlib.closing(sqlite3.connect(source)) as conn,
    ):
        indexed_db.backup(conn)
        conn.execute("UPDATE repos SET error = ? WHERE name = 'shop'", ("a\x00b",))
        conn.commit()
    target = postgres.create("half")
    code, err = cli("--from", str(source), "--to", target)
    assert (code, len(err.splitlines())) == (2, 1), err
    assert "does not fit the target, so nothing was copied" in err, err
    assert pg_tables(target) == []
