"""The catalog's database, SQLite or PostgreSQL, through one code path (SQLAlchemy Core).

Statements are SQL text with named parameters (``:name``); a list or tuple value is expanded
for ``IN :name``. ``read(sql, params)`` runs a query on a pooled connection; ``write(fn)`` runs
``fn(tx)`` in one transaction on this process's single writer thread and returns its result.

Writes are serialized across processes, so code that reads and then writes inside one ``write``
(leases, counters, "insert unless present") needs no reasoning of its own: in compose about seven
processes write one database.

- **SQLite**: each write is one ``BEGIN IMMEDIATE`` transaction: the file's write lock is taken
  before the first statement, so a write that reads first sees the last commit of every process
  (a deferred transaction that reads and then writes fails with "database is locked" instead),
  and taking the lock is retried with backoff when another process holds it longer than the busy
  timeout. WAL mode lets readers run beside the writer.
- **PostgreSQL**: the first statement of each write takes one transaction-scoped advisory lock
  (``pg_advisory_xact_lock``), released at commit or rollback: the same one-writer-at-a-time
  order as SQLite's file lock, where READ COMMITTED alone would let two read-then-write
  transactions interleave and lose an update. Reads never take it.

The schema is migrated by Alembic (``coderag.store.migrate``) when a process opens the database,
inside such a write, so concurrent startups run the migrations once.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast
from urllib.parse import quote

import sqlalchemy as sa

# both dialects imported now, not by the first engine, maybe on a thread (see _migrated)
import sqlalchemy.dialects.postgresql.psycopg
import sqlalchemy.dialects.sqlite.pysqlite
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from coderag.errors import Unavailable
from coderag.store.migrate import upgrade

T = TypeVar("T")

Params = Mapping[str, Any]
"""Named parameters of one statement."""

BUSY_TIMEOUT_S = 10.0
"""How long one attempt waits for another process's write lock (SQLite's busy timeout)."""

LOCK_ATTEMPTS = 6
"""Attempts to take SQLite's write lock before the write fails (about a minute of waiting)."""

WRITE_LOCK = 0x636F646572616701
"""PostgreSQL advisory lock key every write holds ("coderag" and a 1)."""

LOCK_TIMEOUT = "120s"
"""How long a PostgreSQL write waits for the write lock (or a row lock) before it fails."""

POOL = {"pool_size": 5, "max_overflow": 15}
"""Read connections kept per process, and how many more a burst may open (PostgreSQL's default
allows 100 connections, shared by every process)."""


class DatabaseDown(Unavailable):
    """The database did not answer (a PostgreSQL server stopped or unreachable, a SQLite file
    that cannot be opened or stays locked): a 503 naming the database, never its address."""


DatabaseError = (exc.SQLAlchemyError, DatabaseDown)
"""What a failed read or write raises (a driver's own error is the ``orig`` of SQLAlchemy's, or
the ``__cause__`` of ``DatabaseDown``)."""

SQLITE_DOWN = ("locked", "busy", "unable to open", "disk i/o")
"""SQLite errors that mean the file cannot be used now, not that a statement is wrong."""

_STOP = object()


class Row(tuple[Any, ...]):
    """A result row read by position or by column name, like ``sqlite3.Row``."""

    __slots__ = ()
    _index: ClassVar[dict[str, int]] = {}

    # takes a column name as well as tuple's positions and slices (as sqlite3.Row does), which
    # tuple's overloads cannot say
    def __getitem__(self, key: int | slice | str) -> Any:  # type: ignore[override]
        """The value at a position, slice or column name."""
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        """The column names, in order."""
        return list(self._index)


@lru_cache(maxsize=512)
def _row_type(keys: tuple[str, ...]) -> type[Row]:
    return type("Row", (Row,), {"__slots__": (), "_index": {k: i for i, k in enumerate(keys)}})


class Result:
    """The rows a statement returned (read at once) and how many rows it changed."""

    def __init__(self, cursor: sa.CursorResult[Any]) -> None:
        self.rowcount: int = cursor.rowcount
        self.rows: list[Row] = _rows(cursor) if cursor.returns_rows else []

    def fetchone(self) -> Row | None:
        """The first row, None when there is none."""
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Row]:
        """Every row."""
        return self.rows

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)


class Tx:
    """One write transaction; ``connection`` is the SQLAlchemy connection it runs on."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def execute(self, sql: str, params: Params | None = None) -> Result:
        """Run one statement with named parameters."""
        params = params or {}
        return Result(self.connection.execute(statement(sql, params), params))

    def executemany(self, sql: str, rows: Iterable[Params]) -> int:
        """Run one statement once per parameter set (none: nothing runs); rows changed."""
        rows = list(rows)
        if not rows:
            return 0
        if self.connection.dialect.name == "sqlite":
            # sqlite3 takes ``:name`` parameters itself; SQLAlchemy's per-row binding costs
            # several times the insert (tens of thousands of rows at a first index)
            return self.connection.exec_driver_sql(sql, rows).rowcount
        return self.connection.execute(sa.text(sql), rows).rowcount


def insert_sql(table: str, fields: Sequence[str]) -> str:
    """An INSERT of one row into ``table`` with a named parameter per column."""
    return (
        f"INSERT INTO {table} ({', '.join(fields)}) VALUES ({', '.join(':' + f for f in fields)})"
    )


def statement(sql: str, params: Params) -> sa.TextClause:
    """``sql`` as a statement, its list and tuple parameters expanded for ``IN :name``."""
    stmt = sa.text(sql)
    many = [k for k, v in params.items() if isinstance(v, list | tuple | set | frozenset)]
    return stmt.bindparams(*(sa.bindparam(k, expanding=True) for k in many)) if many else stmt


def _rows(cursor: sa.CursorResult[Any]) -> list[Row]:
    make = _row_type(tuple(cursor.keys()))
    return [make(r) for r in cursor.fetchall()]


def url_of(target: Path | str) -> sa.URL:
    """The SQLAlchemy URL of a SQLite file path or a database URL (``postgresql://`` uses
    psycopg 3, which SQLAlchemy does not pick by itself)."""
    if isinstance(target, Path):
        return sa.URL.create("sqlite", database=str(target))
    url = sa.make_url(target)
    if url.drivername in ("postgres", "postgresql"):
        url = url.set(drivername="postgresql+psycopg")
    return url


def _down(dialect: str, error: exc.SQLAlchemyError) -> bool:
    """Whether a failed statement means the database is unreachable (not a wrong statement)."""
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True
    if dialect == "sqlite":
        text = str(error.orig if isinstance(error, exc.DBAPIError) else error).lower()
        return isinstance(error, exc.OperationalError) and any(t in text for t in SQLITE_DOWN)
    return isinstance(error, exc.OperationalError | exc.InterfaceError | exc.TimeoutError)


def _is_busy(error: Exception) -> bool:
    """Whether an error means another connection holds SQLite's lock (worth retrying)."""
    text = str(error).lower()
    return "locked" in text or "busy" in text


def with_lock_retry(step: Callable[[], T]) -> T:
    """Run ``step``, retrying with jittered backoff while SQLite reports the file locked."""
    for attempt in range(LOCK_ATTEMPTS):
        try:
            return step()
        except (sqlite3.OperationalError, exc.OperationalError) as error:
            if not _is_busy(error) or attempt == LOCK_ATTEMPTS - 1:
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def _sqlite_engine(url: sa.URL) -> Engine:
    Path(url.database or "").parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S}, **POOL)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        # transactions are begun by _begin below, never implicitly by the sqlite3 module
        dbapi_conn.isolation_level = None
        # switching a fresh file to WAL needs the lock another process may be holding
        with_lock_retry(lambda: dbapi_conn.execute("PRAGMA journal_mode=WAL"))
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # a read runs in autocommit; only BEGIN is retried: once it succeeds this connection
        # holds the write lock, and the write runs exactly once
        if conn.get_execution_options().get("coderag_write"):
            with_lock_retry(lambda: conn.exec_driver_sql("BEGIN IMMEDIATE"))

    return engine


def read_sqlite_schema(path: Path) -> None:
    """Read a SQLite file's schema without any write (opened read-only); sqlite3.Error when it is
    not a SQLite database."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()


def one_writer_engine(url: sa.URL) -> Engine:
    """An engine without a pool for one write transaction on a database not yet known to be
    coderag's: SQLite's file is not switched to WAL (that writes), and each transaction takes
    the file's write lock at BEGIN, so DDL runs inside it."""
    sqlite = url.get_backend_name() == "sqlite"
    args = {"timeout": BUSY_TIMEOUT_S} if sqlite else {}
    engine = sa.create_engine(url, poolclass=NullPool, connect_args=args)
    if sqlite:

        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
            dbapi_conn.isolation_level = None  # BEGIN IMMEDIATE below, DDL inside it
            dbapi_conn.execute("PRAGMA foreign_keys=ON")

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def take_write_lock(conn: Connection) -> None:
    """In a PostgreSQL transaction, wait for the write lock every coderag process takes (SQLite's
    BEGIN IMMEDIATE took the file's)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")


class Database:
    """A SQLite file (a ``Path``) or a database URL (``postgresql://...``): pooled reads, writes
    serialized one at a time; SQL text takes named parameters (``:name``) given as a mapping."""

    def __init__(self, target: Path | str) -> None:
        self.url = url_of(target)
        self.dialect = self.url.get_backend_name()
        self.path = Path(self.url.database or "") if self.dialect == "sqlite" else None
        if self.dialect == "sqlite":
            self.engine = _sqlite_engine(self.url)
        else:
            self.engine = sa.create_engine(self.url, pool_pre_ping=True, **POOL)
        self._closed = False
        self._start_writer()
        _open.add(self)
        key = self.url.render_as_string(hide_password=False)
        if key not in _migrated:
            # the driver's own error, not DatabaseDown: opening names its target itself
            self._queued(lambda tx: upgrade(tx.connection))
            _migrated.add(key)

    def _start_writer(self) -> None:
        self._jobs: queue.Queue[object] = queue.Queue()
        self._writer = threading.Thread(target=self._run_writer, name="db-writer", daemon=True)
        self._writer.start()

    def _run_writer(self) -> None:
        while True:
            item = self._jobs.get()
            if item is _STOP:
                break
            fn, fut = cast("tuple[Callable[[Tx], object], Future[object]]", item)
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                result = self.write_now(fn)
            except BaseException as error:  # the caller re-raises it
                fut.set_exception(error)
            else:
                fut.set_result(result)

    def write_now(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in one serialized transaction on a connection of its own, on this thread,
        not behind this process's queued writes (a lease's heartbeat)."""
        with self.engine.connect() as conn:
            conn.execution_options(coderag_write=True)
            with conn.begin():
                if self.dialect == "postgresql":
                    conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
                return fn(Tx(conn))

    def write(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in one transaction on the writer thread and return its result; committed
        before the caller is woken, so its next read sees the write; DatabaseDown when the
        database does not answer."""
        try:
            return self._queued(fn)
        except exc.SQLAlchemyError as error:
            if _down(self.dialect, error):
                raise self._unavailable() from error
            raise

    def _queued(self, fn: Callable[[Tx], T]) -> T:
        fut: Future[T] = Future()
        self._jobs.put((fn, fut))
        return fut.result()

    def read(self, sql: str, params: Params | None = None) -> list[Row]:
        """Run a read-only query with named parameters on a pooled connection; DatabaseDown when
        the database does not answer."""
        params = params or {}
        try:
            with self.engine.connect() as conn:
                return _rows(conn.execute(statement(sql, params), params))
        except exc.SQLAlchemyError as error:
            if _down(self.dialect, error):
                raise self._unavailable() from error
            raise

    def _unavailable(self) -> DatabaseDown:
        """The error a request gets while this database does not answer."""
        name = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(self.dialect, self.dialect)
        return DatabaseDown(
            f"the database ({name}) is not answering; the request can be sent again once it is "
            "back (GET /health with an admin token says why)"
        )

    def ping(self) -> None:
        """Raise when the database cannot be read (for /health)."""
        self.read("SELECT 1")

    def close(self) -> None:
        """Stop the writer thread after queued writes finish and close the connections."""
        self._closed = True
        if self._writer.is_alive():
            self._jobs.put(_STOP)
            self._writer.join()
        self.engine.dispose()


_open: weakref.WeakSet[Database] = weakref.WeakSet()

_migrated: set[str] = set()
"""Databases this process has migrated: another ``Database`` on one of them (a worker's healing
thread opens its own) skips Alembic. Everything a migration imports is imported with this module:
an import left to a background thread while the main thread forks an rq work horse leaves the
module's import lock held in the child, whose next import of it hangs for ever."""


def _after_fork() -> None:
    """In a forked child (an rq work horse) the parent's pooled connections are not ours to use
    or close: forget them; the parent's writer thread does not exist here: start one."""
    for db in list(_open):
        if not db._closed:
            db.engine.dispose(close=False)
            db._start_writer()


os.register_at_fork(after_in_child=_after_fork)
