"""Schema migrations: Alembic's revisions in ``migrations/versions``, run to the head revision by
the process that opens the database first (``Database`` runs ``upgrade`` inside a write, so the
write lock keeps concurrent startups from racing); and a catalog's move into another, empty
database (``copy_into``, for ``coderag copy-database``): checked empty, migrated and filled in
one transaction, so a refused or failed copy leaves nothing there."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from coderag.errors import Conflict, InvalidInput

MIGRATIONS = Path(__file__).with_name("migrations")
"""Alembic's script directory, shipped inside the package."""

VERSION_TABLE = "alembic_version"
"""Alembic's bookkeeping table, which a copy leaves to each database's own migrations."""

BATCH = 5000
"""Rows a copy reads and inserts at a time (a million-line index holds millions of rows)."""

CATALOG_TABLES = ("repos", "units")
"""Tables whose presence together marks a PostgreSQL schema as holding a coderag catalog."""


def config(connection: Connection | None = None) -> Config:
    """Alembic's configuration, its migrations to run on ``connection``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    cfg.attributes["connection"] = connection
    return cfg


@lru_cache(maxsize=1)
def heads() -> frozenset[str]:
    """The head revisions of the shipped migrations."""
    return frozenset(ScriptDirectory.from_config(config()).get_heads())


def current(connection: Connection) -> frozenset[str]:
    """The revisions the database is at (none for a new one, or one made before migrations)."""
    return frozenset(MigrationContext.configure(connection).get_current_heads())


def upgrade(connection: Connection) -> None:
    """Bring the database to the head revision, in the transaction ``connection`` is in; a
    database made before migrations existed is completed to the first revision and stamped."""
    if current(connection) != heads():
        command.upgrade(config(connection), "head")


def tables(bind: Engine | Connection) -> list[sa.Table]:
    """The database's tables but Alembic's, in an order that inserts each after those it refers
    to."""
    meta = sa.MetaData()
    meta.reflect(bind)
    return [t for t in meta.sorted_tables if t.name != VERSION_TABLE]


def objects(target: Connection) -> list[str]:
    """The tables and views in the schema ``target`` writes to (SQLite's own excepted)."""
    found = sa.inspect(target)
    names = found.get_table_names() + found.get_view_names()
    return sorted(n for n in names if not n.startswith("sqlite_"))


def current_schema(conn: Connection) -> str | None:
    """The PostgreSQL schema ``conn`` reads and creates unqualified tables in: the first of its
    search_path that exists; None when none does."""
    return conn.execute(sa.text("SELECT current_schema()")).scalar()


def search_path(conn: Connection) -> str:
    """The PostgreSQL search_path ``conn`` runs with, as ``SHOW`` gives it."""
    return str(conn.execute(sa.text("SHOW search_path")).scalar())


def catalog_schemas(conn: Connection) -> list[str]:
    """The PostgreSQL schemas of the database ``conn`` is on that hold a coderag catalog (every
    table of ``CATALOG_TABLES``), in name order; ``pg_tables`` lists them whatever the
    search_path, which alone decides what the inspector and unqualified statements see."""
    query = sa.text(
        "SELECT schemaname FROM pg_catalog.pg_tables WHERE tablename IN :names "
        "GROUP BY schemaname HAVING count(DISTINCT tablename) = :wanted ORDER BY schemaname"
    ).bindparams(sa.bindparam("names", expanding=True))
    names = list(CATALOG_TABLES)
    return list(conn.execute(query, {"names": names, "wanted": len(names)}).scalars())


def copy_into(source: Connection, target: Connection) -> dict[str, int]:
    """Migrate the empty ``target`` to the head revision and insert every row of the ``source``
    database (at the head revision, read in one snapshot), all inside the transaction ``target``
    is in; the rows per table. Conflict when the target's schema holds any table or view (another
    application's, or a catalog: merging two would mix two histories of the same names), checked
    before anything is written; InvalidInput when a row does not fit the target."""
    held = objects(target)
    if held:
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        raise Conflict(
            f"the target database is not empty (it holds {shown}): copy into a new, empty "
            "database; nothing was written"
        )
    upgrade(target)
    wanted = tables(target)
    counts: dict[str, int] = {}
    _snapshot(source)
    try:
        for table in wanted:
            counts[table.name] = 0
            try:
                for rows in _batches(source, table):
                    target.execute(table.insert(), rows)
                    counts[table.name] += len(rows)
            except DBAPIError as error:
                raise InvalidInput(
                    f"a row of {table.name!r} does not fit the target, so nothing was copied: "
                    f"{one_line(error.orig)}"
                ) from error
    finally:
        source.rollback()
    if target.dialect.name == "postgresql":
        _restart_identities(target, wanted)
    return counts


def one_line(error: object) -> str:
    """A driver's error as one line (PostgreSQL's carry DETAIL and HINT lines)."""
    return " ".join(str(error).split())


def _snapshot(conn: Connection) -> None:
    """Begin a read transaction on ``conn`` that sees one state of the source throughout."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN")  # the engine runs reads in autocommit otherwise
    else:
        conn.execution_options(isolation_level="REPEATABLE READ")
        conn.begin()


def _batches(conn: Connection, table: sa.Table) -> Iterator[list[dict[str, Any]]]:
    """The source's rows of ``table`` (only the target's columns), ``BATCH`` at a time."""
    names = [c.name for c in table.columns]
    query: sa.Select[*tuple[Any, ...]] = sa.select(*(sa.column(n) for n in names)).select_from(
        sa.table(table.name)
    )
    result = conn.execute(query.execution_options(stream_results=True))
    while chunk := result.fetchmany(BATCH):
        yield [dict(zip(names, row, strict=True)) for row in chunk]


def _restart_identities(conn: Connection, copied: list[sa.Table]) -> None:
    """Move each identity column's sequence past the ids copied, so the next insert does not
    reuse one (an explicit id does not advance PostgreSQL's sequence; a column without one
    gives NULL, which ``setval`` ignores)."""
    for table in copied:
        for column in table.primary_key.columns:
            if isinstance(column.type, sa.Integer):
                sequence = sa.func.pg_get_serial_sequence(table.name, column.name)
                after = sa.func.coalesce(sa.func.max(column), 0) + 1
                conn.execute(sa.select(sa.func.setval(sequence, after, False)))
