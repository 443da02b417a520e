"""``coderag copy-database``: a team that outgrows the embedded SQLite file moves its catalog,
audit log and sessions to PostgreSQL without indexing anything again (the vectors stay where they
are: in Chroma, which the database only names by repository). This module checks what it is
given and opens both databases; the rows move in ``coderag.store.migrate.copy_rows``."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.exc import ArgumentError, OperationalError

from coderag.errors import InvalidInput, Unavailable
from coderag.store.database import Database, url_of
from coderag.store.migrate import copy_rows

DIALECTS = ("sqlite", "postgresql")
"""The databases the catalog runs on."""


def copy_database(source: Path | str, target: Path | str) -> dict[str, int]:
    """Copy every row of ``source`` (a SQLite file or a database URL) into the empty ``target``,
    both first migrated to the shipped schema (as a server's start would); the rows copied per
    table. InvalidInput when the two are one database, a URL does not parse or names another
    kind of database, the source file does not exist or a row does not fit the target;
    Conflict when the target holds rows; Unavailable when a server does not answer. Nothing
    is written on error."""
    if isinstance(source, Path) and not source.is_file():
        raise InvalidInput(f"no database file at {source}")
    urls = [_url(t) for t in (source, target)]
    if urls[0] == urls[1]:
        raise InvalidInput("the source and the target are the same database")
    src = _open(source)
    try:
        dst = _open(target)
        try:
            with src.engine.connect() as conn:
                return dst.write(lambda tx: copy_rows(conn, tx.connection))
        finally:
            dst.close()
    finally:
        src.close()


def _shown(target: Path | str) -> str:
    """How an error names a database: a file by its path, a URL not at all (it may hold a
    password)."""
    return str(target) if isinstance(target, Path) else "the database URL"


def _url(target: Path | str) -> str:
    """``target``'s URL as text; InvalidInput when it does not parse or names a database the
    catalog does not run on."""
    try:
        url = url_of(target.resolve() if isinstance(target, Path) else target)
    except (ArgumentError, ValueError) as error:  # no scheme, a port that is not a number
        raise InvalidInput(f"{_shown(target)} is not a database URL: {error}") from error
    if url.get_backend_name() not in DIALECTS:
        raise InvalidInput(
            f"{_shown(target)} names {url.get_backend_name()}; coderag stores its catalog in "
            "SQLite or PostgreSQL"
        )
    return url.render_as_string(hide_password=False)


def _open(target: Path | str) -> Database:
    """The database at ``target``, migrated; Unavailable when its server does not answer."""
    try:
        return Database(target)
    except OperationalError as error:
        raise Unavailable(f"cannot open {_shown(target)}: {error.orig}") from error
