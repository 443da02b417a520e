"""``coderag copy-database``: a team that outgrows the embedded SQLite file moves its catalog,
audit log and sessions to PostgreSQL without indexing anything again (the vectors stay where they
are: in Chroma, which the database only names by repository). This module checks what it is
given and opens both databases; the target is checked empty, migrated and filled in one
transaction (``coderag.store.migrate.copy_into``), so a refused or failed copy writes nothing
there: PostgreSQL and SQLite both roll DDL back. Every refusal is one line saying what to fix."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa
from alembic.util.exc import CommandError
from sqlalchemy.engine import Connection
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError

from coderag.errors import Conflict, InvalidInput, Unavailable
from coderag.store.database import (
    Database,
    one_writer_engine,
    read_sqlite_schema,
    take_write_lock,
    url_of,
)
from coderag.store.migrate import (
    catalog_schemas,
    copy_into,
    current_schema,
    one_line,
    search_path,
)

DRIVERS = {"sqlite": "sqlite", "sqlite+pysqlite": "sqlite", "postgresql+psycopg": "postgresql"}
"""The URL schemes (after ``url_of``: ``postgresql://`` means psycopg 3) the catalog runs on, and
their database; other drivers (asyncpg, psycopg2) are not installed."""

EXAMPLE = "postgresql://user:password@host/database"
"""The target URL a message shows as the form to use."""

SCHEMA_PARAMETERS = ("schema", "search_path", "currentschema")
"""URL parameters other tools read a PostgreSQL schema from (lowercased), which libpq refuses:
PostgreSQL takes a schema as ``options=-csearch_path=...``."""

SIDE_FILES = ("", "-journal", "-wal", "-shm")
"""A SQLite file and the files SQLite keeps beside it, removed again when a copy into a new
file fails."""


def copy_database(source: Path | str, target: Path | str) -> dict[str, int]:
    """Copy every row of ``source`` (a SQLite file or a database URL, first migrated to the
    shipped schema as a server's start would) into ``target``, which must hold no table at all;
    the rows copied per table. InvalidInput when the two are one database, a URL does not parse,
    names another kind of database or driver, a database in memory or a file that is not a SQLite
    database, the source file does not exist, or a row does not fit the target; Conflict when the
    target holds any table; Unavailable when a server does not answer. Nothing is written to the
    target on error (a SQLite file the copy created is removed)."""
    src_url, dst_url = _checked(source, "source"), _checked(target, "target")
    if _key(src_url) == _key(dst_url):
        raise InvalidInput("the source and the target are the same database")
    if src_url.get_backend_name() == "sqlite" and not Path(src_url.database or "").is_file():
        raise InvalidInput(f"no database file at {src_url.database}")
    new_files = _check_sqlite_target(dst_url)
    # before _open, which migrates: a source URL that misses its catalog's schema would have
    # an empty catalog made in the schema it names, and the copy would carry no row
    _check_source_schema(src_url, _shown(source))
    try:
        src = _open(source)
        try:
            with src.engine.connect() as conn, _transaction(dst_url, _shown(target)) as dst:
                _check_target_schema(dst, dst_url)
                return copy_into(conn, dst)
        finally:
            src.close()
    except BaseException:
        for path in new_files:
            path.unlink(missing_ok=True)
        raise


def _shown(target: Path | str | sa.URL) -> str:
    """How an error names a database: a file by its path, a server's URL not at all (it may
    hold a password)."""
    if isinstance(target, Path):
        return str(target)
    url = target if isinstance(target, sa.URL) else _parsed(target)
    if url is not None and url.get_backend_name() == "sqlite" and url.database:
        return url.database
    return "the database URL"


def _parsed(target: str) -> sa.URL | None:
    """``target`` as a URL, None when it does not parse."""
    try:
        return url_of(target)
    except (ArgumentError, ValueError):
        return None


def _checked(target: Path | str, side: str) -> sa.URL:
    """``target``'s URL; InvalidInput when it does not parse or names a database, a driver or a
    place the catalog cannot be copied from or to."""
    try:
        url = url_of(target.resolve() if isinstance(target, Path) else target)
    except (ArgumentError, ValueError) as error:  # no scheme, a port that is not a number
        raise InvalidInput(
            f"{_shown(target)} is not a database URL ({one_line(error)}): write it as {EXAMPLE}"
        ) from error
    backend = url.get_backend_name()
    if backend not in DRIVERS.values():
        raise InvalidInput(
            f"{_shown(target)} names {backend}; coderag stores its catalog in SQLite or "
            f"PostgreSQL: write {EXAMPLE}"
        )
    if url.drivername not in DRIVERS:
        driver = url.get_driver_name()
        raise InvalidInput(
            f"the {side} URL asks for the driver {driver}, which coderag does not use: write "
            f"{backend}://... without +{driver} (PostgreSQL is reached through psycopg 3)"
        )
    named = [k for k in url.query if k.lower() in SCHEMA_PARAMETERS]
    if backend == "postgresql" and named:
        value = url.query[named[0]]
        schema = value if isinstance(value, str) else ",".join(value)
        raise InvalidInput(
            f"the {side} URL names a schema with ?{named[0]}=, which PostgreSQL does not take: "
            f"write {_in_url(schema)} instead"
        )
    if backend == "sqlite" and (not url.database or url.database == ":memory:"):
        raise InvalidInput(
            f"the {side} URL names a SQLite database in memory, which is gone when the copy "
            "ends: name a file, e.g. sqlite:////srv/coderag/coderag.db"
        )
    return url


def _names_schema(url: sa.URL) -> bool:
    """Whether ``url`` sets its connections' search_path itself (``options=-csearch_path=...``)."""
    value = url.query.get("options", "")
    return "search_path" in (value if isinstance(value, str) else " ".join(value))


def _schemas(url: sa.URL, shown: str) -> tuple[str | None, str, list[str]]:
    """For a PostgreSQL URL, the schema its connections use (None when its search_path names
    none that exists), that search_path, and the schemas holding a coderag catalog; read on a
    connection of its own, which writes nothing."""
    engine = one_writer_engine(url)
    try:
        with engine.connect() as conn:
            return current_schema(conn), search_path(conn), catalog_schemas(conn)
    except OperationalError as error:
        raise Unavailable(f"cannot open {shown}: {one_line(error.orig)}") from error
    except DBAPIError as error:
        raise InvalidInput(f"cannot open {shown}: {one_line(error.orig)}") from error
    finally:
        engine.dispose()


def _check_source_schema(url: sa.URL, shown: str) -> None:
    """InvalidInput when a PostgreSQL source's search_path names no schema that exists, or one
    without a coderag catalog while another schema holds one (the copy would read an empty
    catalog there); what to write in the URL."""
    if url.get_backend_name() != "postgresql":
        return
    schema, path, found = _schemas(url, shown)
    where = f"; found them in {', '.join(found)}" if found else ""
    fix = (
        f"set {_in_url(found[0])} in the source URL"
        if found
        else "name the schema that holds the catalog with ?options=-csearch_path%3D<schema>"
    )
    if schema is None:
        raise InvalidInput(
            f"no schema on the source's search_path ({path}) exists in that database, so it "
            f"holds no coderag tables there{where}: {fix}"
        )
    if found and schema not in found:
        raise InvalidInput(
            f"no coderag tables in schema {schema} of the source database{where}: {fix}"
        )


def _in_url(schema: str) -> str:
    """The URL parameter that makes a connection's tables those of ``schema`` (a name that is not
    lower case or has other characters than letters, digits and _ quoted, as PostgreSQL reads
    it)."""
    plain = schema.isidentifier() and schema == schema.lower()
    name = schema if plain else '"' + schema.replace('"', '""') + '"'
    return f"?options={quote(f'-csearch_path={name}')}"


def _check_target_schema(conn: Connection, url: sa.URL) -> None:
    """On a PostgreSQL target, InvalidInput when the search_path names no schema that exists
    (nothing to create tables in); Conflict when a URL that names no schema would start a
    catalog beside one another schema holds (a server on the other URL would never read it)."""
    if conn.dialect.name != "postgresql":
        return
    schema = current_schema(conn)
    if schema is None:
        path = search_path(conn)
        first = path.split(",")[0].strip().strip('"')
        raise InvalidInput(
            f"the target database has no schema to create the tables in (search_path is {path}): "
            f"CREATE SCHEMA {first} there first, or name an existing schema in the URL; nothing "
            "was written"
        )
    elsewhere = [s for s in catalog_schemas(conn) if s != schema]
    if elsewhere and not _names_schema(url):
        raise Conflict(
            f"the target database already holds a coderag catalog in schema "
            f"{', '.join(elsewhere)}, and this URL writes to schema {schema}: copy into a new, "
            f"empty database, or name the schema in the URL ({_in_url(schema)}) to keep two "
            "catalogs; nothing was written"
        )


def _key(url: sa.URL) -> str:
    """``url`` as text, a SQLite file by its resolved path, to tell whether two are one."""
    if url.get_backend_name() == "sqlite":
        url = url.set(drivername="sqlite", database=str(Path(url.database or "").resolve()))
    return url.render_as_string(hide_password=False)


def _check_sqlite_target(url: sa.URL) -> list[Path]:
    """For a SQLite target, the files a copy would create (to remove when it fails); InvalidInput
    when its folder does not exist or an existing file is not a SQLite database, found by a
    read-only open, before anything can write there."""
    if url.get_backend_name() != "sqlite":
        return []
    path = Path(url.database or "")
    if not path.parent.is_dir():
        raise InvalidInput(f"there is no folder {path.parent} for the target file: make it first")
    if path.exists():
        try:
            read_sqlite_schema(path)
        except sqlite3.Error as error:
            raise InvalidInput(
                f"{path} is not a SQLite database ({error}): name a new file or an empty database"
            ) from error
    return [p for p in (Path(f"{path}{s}") for s in SIDE_FILES) if not p.exists()]


@contextlib.contextmanager
def _transaction(url: sa.URL, shown: str) -> Iterator[Connection]:
    """One write transaction on the target, committed when the block ends without error, under
    the write lock every coderag process takes (so a server starting on it waits); SQLite's
    file is not switched to WAL (that would write before the target is known to be empty).
    A driver's error becomes one line naming the target."""
    engine = one_writer_engine(url)
    try:
        try:
            conn = engine.connect()
        except OperationalError as error:
            raise Unavailable(f"cannot open {shown}: {one_line(error.orig)}") from error
        except DBAPIError as error:  # a bad connection option (connect_timeout=abc)
            raise InvalidInput(f"cannot open {shown}: {one_line(error.orig)}") from error
        with conn, conn.begin():
            take_write_lock(conn)
            yield conn
    except DBAPIError as error:
        raise InvalidInput(
            f"cannot copy into {shown}, so nothing was written: {one_line(error.orig)}"
        ) from error
    finally:
        engine.dispose()


def _open(source: Path | str) -> Database:
    """The source database, migrated; Unavailable when its server does not answer."""
    try:
        return Database(source)
    except OperationalError as error:
        raise Unavailable(f"cannot open {_shown(source)}: {one_line(error.orig)}") from error
    except DBAPIError as error:
        raise InvalidInput(f"cannot open {_shown(source)}: {one_line(error.orig)}") from error
    except CommandError as error:  # at a revision these migrations do not know
        raise InvalidInput(
            f"{_shown(source)} is not a coderag database this version can read: {error}"
        ) from error
