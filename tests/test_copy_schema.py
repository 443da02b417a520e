"""``coderag copy-database`` and PostgreSQL schemas: a catalog a server keeps in a schema other
than ``public`` (its URL carries ``options=-csearch_path=...``) is copied from when the URL names
that schema, and refused with the schema to name when it does not, instead of being taken for an
empty database (which migrated ``public`` of the source and copied no row); a target that
already holds a catalog in another schema, or whose search_path names no schema, is refused with
what to fix; a target URL that names a schema is copied into that schema. Real processes against
a real PostgreSQL server; nothing is written on any refusal."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import psycopg

from coderag.store.database import Database, Tx
from harness.postgres import Postgres
from tests.test_transfer import cli, pg_tables

AUDIT = (
    'INSERT INTO audit (ts, "user", endpoint, repo, query, retrieved_files, response_ms, status) '
    "VALUES ('2026-01-01T00:00:00Z', :user, '/search', 'shop', 'q', '', 1.5, 'ok')"
)
"""An audit row, without its id (the identity gives it)."""


def in_schema(url: str, schema: str) -> str:
    """``url`` with its connections' search_path set to ``schema``, as a server's URL sets it."""
    return f"{url}?options={quote(f'-csearch_path={schema}')}"


def sqlite_catalog(path: Path) -> None:
    """A SQLite catalog with a repository and two audit rows to copy."""
    db = Database(path)

    def fill(tx: Tx) -> None:
        tx.execute("INSERT INTO repos (name, path, status) VALUES ('shop', '/srv/shop', 'ready')")
        tx.executemany(AUDIT, [{"user": "ada"}, {"user": "grace"}])

    try:
        db.write(fill)
    finally:
        db.close()


def read(url: str, sql: str) -> list[tuple]:
    """The rows of one query on ``url``."""
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def test_a_catalog_in_another_schema_is_copied_from_when_named_and_refused_when_not(
    tmp_path: Path, postgres: Postgres
) -> None:
    source = tmp_path / "catalog.db"
    sqlite_catalog(source)
    # a server that keeps its catalog in schema "coderag" of a shared database
    served = postgres.create("served")
    with psycopg.connect(served, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA coderag")
    assert cli("--from", str(source), "--to", in_schema(served, "coderag")) == (0, "")
    assert {name.split(".")[0] for name, _ in pg_tables(served)} == {"coderag"}
    assert ("coderag.repos", 1) in pg_tables(served) and ("coderag.audit", 2) in pg_tables(served)

    target = postgres.create("moved")
    before = {url: pg_tables(url) for url in (served, target)}
    for source_url, schema in ((served, "public"), (in_schema(served, "empty"), "empty")):
        if schema == "empty":
            with psycopg.connect(served, autocommit=True) as conn:
                conn.execute("CREATE SCHEMA empty")
            before[served] = pg_tables(served)
        code, err = cli("--from", source_url, "--to", target)
        assert (code, len(err.splitlines())) == (2, 1), err
        assert f"no coderag tables in schema {schema} of the source database" in err, err
        assert "found them in coderag" in err and "options=-csearch_path%3Dcoderag" in err, err
        assert "Traceback" not in err, err
        # the source was not migrated where it holds no catalog, and the target got nothing
        assert {url: pg_tables(url) for url in before} == before

    # a search_path that names no schema of the source
    code, err = cli("--from", in_schema(served, "nope"), "--to", target)
    assert (code, len(err.splitlines())) == (2, 1), err
    assert "no schema on the source's search_path (nope)" in err, err
    assert "found them in coderag" in err and "options=-csearch_path%3Dcoderag" in err, err
    assert {url: pg_tables(url) for url in before} == before

    # named, the catalog is seen and copied row for row
    assert cli("--from", in_schema(served, "coderag"), "--to", target) == (0, "")
    assert read(target, "SELECT name, path FROM public.repos") == [("shop", "/srv/shop")]
    assert read(target, 'SELECT "user" FROM public.audit ORDER BY id') == [("ada",), ("grace",)]


def test_a_target_with_a_catalog_in_another_schema_or_no_schema_is_refused(
    tmp_path: Path, postgres: Postgres
) -> None:
    source = tmp_path / "catalog.db"
    sqlite_catalog(source)
    shared = postgres.create("shared")
    with psycopg.connect(shared, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA coderag")
    assert cli("--from", str(source), "--to", in_schema(shared, "coderag")) == (0, "")
    held = pg_tables(shared)

    # the URL without its schema would start a second catalog in public beside the first
    code, err = cli("--from", str(source), "--to", shared)
    assert (code, len(err.splitlines())) == (2, 1), err
    assert "already holds a coderag catalog in schema coderag" in err, err
    assert "writes to schema public" in err and "nothing was written" in err, err
    # a search_path whose schema does not exist: said so, not PostgreSQL's "no schema has been
    # selected to create in"
    code, err = cli("--from", str(source), "--to", in_schema(shared, "team_b"))
    assert (code, len(err.splitlines())) == (2, 1), err
    assert "no schema to create the tables in (search_path is team_b)" in err, err
    assert "CREATE SCHEMA team_b" in err, err
    # a schema named as a URL parameter of its own, which PostgreSQL does not take
    code, err = cli("--from", str(source), "--to", f"{shared}?schema=team_b")
    assert (code, len(err.splitlines())) == (2, 1), err
    assert "options=-csearch_path%3Dteam_b" in err, err
    assert pg_tables(shared) == held

    # a second catalog in a schema the URL names on purpose is copied there
    with psycopg.connect(shared, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA team_b")
    assert cli("--from", str(source), "--to", in_schema(shared, "team_b")) == (0, "")
    assert read(shared, "SELECT name FROM team_b.repos") == [("shop",)]
    assert not [name for name, _ in pg_tables(shared) if name.startswith("public.")]
    # the identity goes on past the copied ids in that schema too
    db = Database(in_schema(shared, "team_b"))
    try:
        db.write(lambda tx: tx.execute(AUDIT, {"user": "bob"}))
        ids = [r[0] for r in db.read("SELECT id FROM audit ORDER BY id")]
    finally:
        db.close()
    assert len(ids) == 3 and ids[2] > ids[1], ids
