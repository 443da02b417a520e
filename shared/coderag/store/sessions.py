"""Chat sessions: each session's owner and its turns per repository, created on first use."""

from __future__ import annotations

import sqlite3
import weakref

from coderag.store.sqlite import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS session_turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    repo TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    ts TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
CREATE INDEX IF NOT EXISTS session_turns_by_session ON session_turns (session_id, repo, id);
CREATE TABLE IF NOT EXISTS session_owners (
    session_id TEXT PRIMARY KEY,
    user TEXT NOT NULL
);
"""
"""The tables of sessions; created on first use."""

_ready: weakref.WeakSet[Database] = weakref.WeakSet()


def _ensure(db: Database) -> None:
    if db not in _ready:
        db.write(lambda conn: conn.executescript(SCHEMA))
        _ready.add(db)


def owner(db: Database, session_id: str, user: str) -> str:
    """The session's owner, ``user`` when the session is new."""
    _ensure(db)

    def take(conn: sqlite3.Connection) -> str:
        conn.execute(
            "INSERT OR IGNORE INTO session_owners (session_id, user) VALUES (?,?)",
            (session_id, user),
        )
        row = conn.execute(
            "SELECT user FROM session_owners WHERE session_id=?", (session_id,)
        ).fetchone()
        return row[0]

    return db.write(take)


def last_turns(db: Database, session_id: str, repo: str, limit: int) -> list[sqlite3.Row]:
    """The last ``limit`` turns (role, content, meta, ts) of a session about ``repo``, newest
    first."""
    _ensure(db)
    return db.read(
        "SELECT role, content, meta, ts FROM session_turns WHERE session_id=? AND repo=? "
        "ORDER BY id DESC LIMIT ?",
        (session_id, repo, limit),
    )


def add_turns(
    db: Database, session_id: str, repo: str, turns: list[tuple[str, str, str]], keep: int
) -> None:
    """Append (role, content, meta JSON) turns and keep only the newest ``keep``."""
    _ensure(db)

    def insert(conn: sqlite3.Connection) -> None:
        conn.executemany(
            "INSERT INTO session_turns (session_id, repo, role, content, meta) VALUES (?,?,?,?,?)",
            [(session_id, repo, *t) for t in turns],
        )
        conn.execute(
            "DELETE FROM session_turns WHERE session_id=? AND repo=? AND id NOT IN (SELECT id "
            "FROM session_turns WHERE session_id=? AND repo=? ORDER BY id DESC LIMIT ?)",
            (session_id, repo, session_id, repo, keep),
        )

    db.write(insert)
