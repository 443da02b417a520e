"""SQLite with one writer thread: writes are queued to it, reads use per-thread connections.

WAL mode lets readers run beside the single writer, so a long index write never blocks /search.
In compose several processes (services and their workers) write the same file, so each write is
one short ``BEGIN IMMEDIATE`` transaction: the write lock is taken before the first statement,
so a write that reads first sees the last commit of every process (Python's default begins only
before the first INSERT/UPDATE, and a read-then-write loses updates across processes; a deferred
transaction that reads and then writes fails with "database is locked" instead), and taking the
lock is retried with backoff when another process holds it longer than the busy timeout.
"""

from __future__ import annotations

import queue
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS repos (
    name TEXT PRIMARY KEY,
    path TEXT, url TEXT, branch TEXT,
    status TEXT NOT NULL,
    commit_sha TEXT,
    files INTEGER NOT NULL DEFAULT 0,
    units INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,
    indexed_at TEXT,
    error TEXT,
    progress TEXT,
    generation INTEGER NOT NULL DEFAULT 0,
    dirty TEXT NOT NULL DEFAULT '[]',
    silhouette REAL,
    uid TEXT,
    skipped_reasons TEXT NOT NULL DEFAULT '{}',
    lease_owner TEXT,
    lease_until REAL,
    pending INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    complete INTEGER,
    stages TEXT NOT NULL DEFAULT '{}',
    searchable_at TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))
);
CREATE TABLE IF NOT EXISTS files (
    repo TEXT NOT NULL,
    path TEXT NOT NULL,
    language TEXT NOT NULL,
    lines INTEGER NOT NULL,
    sha TEXT NOT NULL,
    blamed INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (repo, path)
);
CREATE TABLE IF NOT EXISTS units (
    id TEXT PRIMARY KEY,
    repo TEXT NOT NULL,
    file TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    symbol TEXT NOT NULL,
    kind TEXT NOT NULL,
    language TEXT NOT NULL,
    signature TEXT NOT NULL,
    doc TEXT NOT NULL,
    text TEXT NOT NULL,
    is_test INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    facts TEXT NOT NULL DEFAULT '{}',
    last_commit TEXT, last_author TEXT, last_date TEXT
);
CREATE INDEX IF NOT EXISTS units_repo_file ON units (repo, file);
CREATE TABLE IF NOT EXISTS symbols (
    repo TEXT NOT NULL, file TEXT NOT NULL, name TEXT NOT NULL, qualified TEXT NOT NULL,
    kind TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, unit_id TEXT
);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols (repo, name);
CREATE INDEX IF NOT EXISTS symbols_file ON symbols (repo, file);
CREATE TABLE IF NOT EXISTS calls (
    repo TEXT NOT NULL, file TEXT NOT NULL, caller_id TEXT NOT NULL, callee TEXT NOT NULL,
    receiver TEXT NOT NULL, receiver_type TEXT NOT NULL, line INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_callee ON calls (repo, callee);
CREATE INDEX IF NOT EXISTS calls_caller ON calls (caller_id);
CREATE INDEX IF NOT EXISTS calls_file ON calls (repo, file);
CREATE TABLE IF NOT EXISTS file_history (
    repo TEXT NOT NULL, file TEXT NOT NULL, commits INTEGER NOT NULL,
    PRIMARY KEY (repo, file)
);
CREATE TABLE IF NOT EXISTS clusters (
    repo TEXT NOT NULL, unit_id TEXT NOT NULL, label INTEGER NOT NULL,
    PRIMARY KEY (repo, unit_id)
);
CREATE TABLE IF NOT EXISTS imports (
    repo TEXT NOT NULL, file TEXT NOT NULL, module TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS imports_file ON imports (repo, file);
CREATE TABLE IF NOT EXISTS skipped_files (
    repo TEXT NOT NULL, file TEXT NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (repo, file)
);
CREATE TABLE IF NOT EXISTS embed_cache (
    model TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, content_hash)
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    user TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    repo TEXT NOT NULL,
    query TEXT NOT NULL,
    retrieved_files TEXT NOT NULL,
    llm_input_tokens INTEGER NOT NULL DEFAULT 0,
    response_ms REAL NOT NULL,
    status TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_ts ON audit (ts);
"""
"""Tables: repos, their files and units, the embedding cache and the audit log."""

ADDED_COLUMNS = (
    ("repos", "uid", "TEXT"),
    ("repos", "skipped_reasons", "TEXT NOT NULL DEFAULT '{}'"),
    ("repos", "lease_owner", "TEXT"),
    ("repos", "lease_until", "REAL"),
    ("repos", "pending", "INTEGER NOT NULL DEFAULT 0"),
    ("repos", "attempts", "INTEGER NOT NULL DEFAULT 0"),
    ("repos", "complete", "INTEGER"),
    ("repos", "stages", "TEXT NOT NULL DEFAULT '{}'"),
    ("repos", "searchable_at", "TEXT"),
    ("files", "blamed", "INTEGER NOT NULL DEFAULT 1"),
    ("repos", "vectors_mark", "TEXT"),
    ("repos", "ref_of", "TEXT"),
)
"""Columns added after the first release: (table, column, declaration), added to older files."""

_STOP = object()

BUSY_TIMEOUT_S = 10.0
"""How long one attempt waits for another process's write lock (SQLite's busy timeout)."""

LOCK_ATTEMPTS = 6
"""Attempts to take the write lock before the write fails (about a minute of waiting)."""


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether an error means another connection holds the lock (worth retrying)."""
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _with_lock_retry(step: Callable[[], T]) -> T:
    """Run ``step``, retrying with jittered backoff while SQLite reports the file locked."""
    for attempt in range(LOCK_ATTEMPTS):
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or attempt == LOCK_ATTEMPTS - 1:
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


class Database:
    """A SQLite file with a single writer thread and thread-local read connections."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._jobs: queue.Queue[object] = queue.Queue()
        self._writer = threading.Thread(target=self._run_writer, name="sqlite-writer", daemon=True)
        self._ready = threading.Event()
        self._writer.start()
        self._ready.wait()

    def _connect(self, isolation_level: str | None = "") -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_S,
            check_same_thread=False,
            isolation_level=isolation_level,
        )
        conn.row_factory = sqlite3.Row
        # switching a fresh file to WAL needs the lock another process may be holding
        _with_lock_retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _run_writer(self) -> None:
        # autocommit mode: transactions are begun explicitly, IMMEDIATE, by _transaction
        conn = self._connect(isolation_level=None)
        _with_lock_retry(lambda: conn.executescript(SCHEMA))

        def add_columns() -> None:
            for table, column, decl in ADDED_COLUMNS:
                have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")

        _with_lock_retry(add_columns)
        self._ready.set()
        while True:
            item = self._jobs.get()
            if item is _STOP:
                break
            fn, fut = item  # type: ignore[misc]
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                result = self._transaction(conn, fn)
            except BaseException as exc:  # the caller re-raises it
                fut.set_exception(exc)
            else:
                fut.set_result(result)
        conn.close()

    @staticmethod
    def _transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one IMMEDIATE transaction; committed before the caller is woken, so its
        next read sees the write."""
        # only BEGIN is retried: once it succeeds this connection holds the write lock, and fn
        # (which may enqueue jobs) runs exactly once
        _with_lock_retry(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            result = fn(conn)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        if conn.in_transaction:  # executescript commits on its own
            conn.execute("COMMIT")
        return result

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one transaction on the writer thread and return its result."""
        fut: Future[T] = Future()
        self._jobs.put((fn, fut))
        return fut.result()

    def read(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        """Run a read-only query on this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn.execute(sql, params).fetchall()

    def ping(self) -> None:
        """Raise when the database cannot be read (for /health)."""
        self.read("SELECT 1")

    def close(self) -> None:
        """Stop the writer thread after queued writes finish."""
        if self._writer.is_alive():
            self._jobs.put(_STOP)
            self._writer.join()
