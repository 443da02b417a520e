"""Schema migrations: a new database is created at the head revision, a SQLite file made before
migrations existed is adopted without losing a row, and the migrations ship in the package."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import sqlalchemy as sa
from alembic import command

from coderag import audit
from coderag.store import Catalog, Database, migrate
from coderag.store.database import url_of
from coderag.store.repos import SpaceProgress
from tests.old_schema import OLD_ADDED_COLUMNS, OLD_SCHEMA, OLD_SESSIONS
from tests.test_store import audit_row

ROOT = Path(__file__).resolve().parents[1]


def _without_added_columns(schema: str) -> str:
    """The CREATE script of a file older still: none of the columns added since."""
    for table, column in OLD_ADDED_COLUMNS:
        body = re.search(rf"CREATE TABLE IF NOT EXISTS {table} \((.*?)\n\);", schema, re.S)
        assert body is not None
        lines = [ln for ln in body[1].split("\n") if not ln.strip().startswith(column + " ")]
        cut = "\n".join(lines).rstrip().rstrip(",")
        schema = schema.replace(body[1], cut)
    return schema


def _old_file(path: Path, schema: str) -> None:
    """A catalog file as the old code left it, holding a repository, its files and units, an
    audit row and a session."""
    conn = sqlite3.connect(path)
    conn.executescript(schema + OLD_SESSIONS)
    conn.execute("INSERT INTO repos (name, path, status, files) VALUES ('old', '/src', 'ready', 1)")
    conn.execute("INSERT INTO files (repo, path, language, lines, sha) VALUES ('old', 'a.py', "
                 "'python', 3, 'sha')")  # fmt: skip
    conn.execute(
        "INSERT INTO units (id, repo, file, start_line, end_line, symbol, kind, language, "
        "signature, doc, text, is_test, content_hash) VALUES ('u1', 'old', 'a.py', 1, 3, 'f', "
        "'function', 'python', 'def f()', '', 'def f(): pass', 0, 'h')"
    )
    conn.execute(
        "INSERT INTO audit (user, endpoint, repo, query, retrieved_files, response_ms, status) "
        "VALUES ('alice', '/ask', 'old', 'why', '[]', 5, 'ok')"
    )
    conn.execute("INSERT INTO embed_cache VALUES ('m', 'h', ?)", (b"\x00\xff",))
    conn.execute("INSERT INTO session_owners VALUES ('s', 'alice')")
    conn.execute("INSERT INTO session_turns (session_id, repo, role, content) "
                 "VALUES ('s', 'old', 'user', 'hi')")  # fmt: skip
    conn.commit()
    conn.close()


def _adopt(path: Path) -> None:
    db = Database(path)
    try:
        catalog = Catalog(db)
        repo = catalog.get_repo("old")
        assert (repo.status, repo.files, repo.complete, repo.stages) == ("ready", 1, True, {})
        assert catalog.file_versions("old") == {"a.py": "sha"}  # blamed: the default 1
        assert [u.text for u in catalog.units("old")] == ["def f(): pass"]
        assert db.read("SELECT vector FROM embed_cache")[0][0] == b"\x00\xff"
        assert Catalog(db).sessions.owner("s", "bob") == "alice"
        assert [t.content for t in Catalog(db).sessions.last_turns("s", "old", 5)] == ["hi"]
        # the old row keeps its id and timestamp; a new one follows it
        audit_row(catalog, "bob")
        lines = list(audit.export_csv(catalog, None, None))
        assert [ln.split(",")[2] for ln in lines[1:3]] == ["alice", "bob"]
        now = time.time()  # a lease that ends at once: the second adoption claims it again
        assert catalog.chains.claim("old", "t", now, now) == "t"
        catalog.chains.mark_vectors_clean("old", catalog.registration("old"), "x")
        catalog.chains.open_vector_chain("old", "t")
        assert catalog.chains.vectors_follow_chain("old", "t", "x")
        assert migrate.current(db.engine.connect()) == migrate.heads()
    finally:
        db.close()


def test_a_file_made_by_the_old_schema_is_adopted_and_stamped(tmp_path: Path) -> None:
    _old_file(tmp_path / "old.db", OLD_SCHEMA)
    _adopt(tmp_path / "old.db")
    _adopt(tmp_path / "old.db")  # opening it again migrates nothing


def test_a_file_older_still_gains_the_added_columns(tmp_path: Path) -> None:
    path = tmp_path / "older.db"
    _old_file(path, _without_added_columns(OLD_SCHEMA))
    columns = {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(repos)")}
    assert "uid" not in columns and "stages" not in columns
    _adopt(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        columns = {
            r[1] for t in ("repos", "chains") for r in conn.execute(f"PRAGMA table_info({t})")
        }
    # the chain's columns were added to repos, then moved to chains (revision 0003)
    assert {c for t, c in OLD_ADDED_COLUMNS if t == "repos"} | {"repo"} <= columns


def test_a_new_database_is_created_at_the_head_revision(database_target: Path | str) -> None:
    db = Database(database_target)
    try:
        inspector = sa.inspect(db.engine)
        assert {"repos", "units", "audit", "session_turns", "webhook_deliveries"} <= set(
            inspector.get_table_names()
        )
        assert {"units_repo_file", "audit_ts"} <= {
            i["name"] for t in ("units", "audit") for i in inspector.get_indexes(t)
        }
        versions = db.read("SELECT version_num FROM alembic_version")
        assert {r[0] for r in versions} == set(migrate.heads())
    finally:
        db.close()


def test_the_migrations_are_package_data() -> None:
    """An installed wheel must hold env.py, the template and every revision."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["coderag"]
    package = ROOT / "shared/coderag"
    shipped = [
        p.relative_to(package).as_posix()
        for p in migrate.MIGRATIONS.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    assert "store/migrations/env.py" in shipped and len(shipped) >= 3
    assert [f for f in shipped if not any(fnmatch(f, pat) for pat in patterns)] == []


def test_the_chain_columns_move_to_a_table_of_their_own_and_back(
    database_target: Path | str,
) -> None:
    """Revision 0003 moves a chain's lease, restarts, stages and vectors mark from ``repos`` to
    ``chains`` with their values, and its downgrade puts them back."""
    engine = sa.create_engine(url_of(database_target))
    try:
        with engine.begin() as conn:
            command.upgrade(migrate.config(conn), "0002")
            conn.execute(
                sa.text(
                    "INSERT INTO repos (name, status, complete, lease_owner, lease_until, "
                    "pending, attempts, stages, vectors_mark) VALUES ('r', 'ready', 0, 'tok', "
                    ":until, 0, 1, :stages, 'chain:tok:m')"
                ),
                {"until": time.time() + 600, "stages": '{"vector": {"done": 3, "total": 5}}'},
            )
        db = Database(database_target)
        try:
            catalog = Catalog(db)
            assert catalog.get_repo("r").stages == {"vector": SpaceProgress(3, 5)}
            assert catalog.chains.vectors_follow_chain("r", "tok", "m")
            assert [(u.name, u.attempts) for u in catalog.chains.unfinished(("queued",))] == [
                ("r", 1)
            ]
            assert catalog.chains.claim("r", "next", time.time(), time.time() + 60) is None
            columns = {c["name"] for c in sa.inspect(db.engine).get_columns("repos")}
            assert "lease_owner" not in columns and "stages" not in columns
        finally:
            db.close()
        with engine.begin() as conn:
            command.downgrade(migrate.config(conn), "0002")
        with engine.connect() as conn:
            row = conn.execute(
                sa.text("SELECT lease_owner, pending, attempts, vectors_mark FROM repos")
            ).one()
            assert tuple(row) == ("tok", 1, 1, "chain:tok:m")  # the claim marked it pending
            assert "chains" not in sa.inspect(conn).get_table_names()
    finally:
        engine.dispose()
