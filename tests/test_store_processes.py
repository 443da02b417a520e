"""One database written by many processes at once, on both backends: in compose the services and
their workers write one SQLite file or one PostgreSQL database."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from coderag import audit
from coderag.store import Catalog, Database, migrate
from coderag.store.database import Tx
from tests.test_store import audit_row

WRITERS = 20
ROWS_EACH = 25


def _writer(target: Path | str, index: int, start: multiprocessing.synchronize.Barrier) -> str:
    """One process: open the database as a service does (all at once, so the first migration
    races too), then write audit rows and counter bumps."""
    try:
        start.wait()
        db = Database(target)
        catalog = Catalog(db)
        db.write(lambda c: c.execute("CREATE TABLE IF NOT EXISTS counter (n INTEGER NOT NULL)"))
        for row in range(ROWS_EACH):
            audit_row(catalog, f"writer-{index}", f"q{row}")
            # read, then write: unless each write holds the write lock from its first statement
            # (SQLite: BEGIN IMMEDIATE; PostgreSQL: the advisory lock) another process commits
            # between the two and a bump is lost (measured on SQLite: 467 distinct values of 500
            # with a deferred BEGIN)
            db.write(_bump)
        db.close()
    except Exception as exc:  # reported to the parent, which fails the test with it
        return f"writer {index}: {type(exc).__name__}: {exc}"
    return ""


def _bump(conn: Tx) -> None:
    n = conn.execute("SELECT count(*) FROM counter").fetchone()[0]
    conn.execute("INSERT INTO counter (n) VALUES (:n)", {"n": n + 1})


@pytest.mark.slow
def test_twenty_processes_write_at_once_without_loss_or_lock_errors(
    database_target: Path | str,
) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Manager().Barrier(WRITERS)
    with ctx.Pool(WRITERS) as pool:
        errors = pool.starmap(_writer, [(database_target, i, start) for i in range(WRITERS)])
    assert [e for e in errors if e] == []
    db = Database(database_target)
    rows = db.read('SELECT "user", count(*) FROM audit GROUP BY "user"')
    assert dict(rows) == {f"writer-{i}": ROWS_EACH for i in range(WRITERS)}
    # every bump saw all the bumps before it: the counter values are exactly 1..N, no repeats
    values = sorted(n for (n,) in db.read("SELECT n FROM counter"))
    assert values == list(range(1, WRITERS * ROWS_EACH + 1))
    csv_lines = list(audit.export_csv(Catalog(db), None, None))
    assert len(csv_lines) == 1 + WRITERS * ROWS_EACH
    # the racing startups migrated once
    assert {r[0] for r in db.read("SELECT version_num FROM alembic_version")} == migrate.heads()
    db.close()
