"""Chat sessions: each session's owner and its turns per repository."""

from __future__ import annotations

from dataclasses import dataclass

from coderag.store.audit_log import now_ts
from coderag.store.database import Database, Tx


@dataclass(frozen=True)
class Turn:
    """One stored turn of a session: who spoke, what, its metadata as JSON, and when."""

    role: str
    content: str
    meta: str
    ts: str


class Sessions:
    """The ``session_owners`` and ``session_turns`` tables (``catalog.sessions``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def owner(self, session_id: str, user: str) -> str:
        """The session's owner, ``user`` when the session is new."""

        def take(conn: Tx) -> str:
            conn.execute(
                'INSERT INTO session_owners (session_id, "user") VALUES (:session, :user) '
                "ON CONFLICT DO NOTHING",
                {"session": session_id, "user": user},
            )
            row = conn.execute(
                'SELECT "user" FROM session_owners WHERE session_id=:session',
                {"session": session_id},
            ).fetchone()
            assert row is not None  # the insert above, or an earlier one, wrote it
            found: str = row[0]
            return found

        return self._db.write(take)

    def last_turns(self, session_id: str, repo: str, limit: int) -> list[Turn]:
        """The last ``limit`` turns of a session about ``repo``, newest first."""
        rows = self._db.read(
            "SELECT role, content, meta, ts FROM session_turns WHERE session_id=:session "
            "AND repo=:repo ORDER BY id DESC LIMIT :limit",
            {"session": session_id, "repo": repo, "limit": limit},
        )
        return [Turn(*r) for r in rows]

    def add_turns(
        self, session_id: str, repo: str, turns: list[tuple[str, str, str]], keep: int
    ) -> None:
        """Append (role, content, meta JSON) turns and keep only the newest ``keep``."""
        ts = now_ts()
        mine = {"session": session_id, "repo": repo}

        def insert(conn: Tx) -> None:
            conn.executemany(
                "INSERT INTO session_turns (session_id, repo, role, content, meta, ts) "
                "VALUES (:session, :repo, :role, :content, :meta, :ts)",
                [{**mine, "role": r, "content": c, "meta": m, "ts": ts} for r, c, m in turns],
            )
            conn.execute(
                "DELETE FROM session_turns WHERE session_id=:session AND repo=:repo AND id NOT IN "
                "(SELECT id FROM session_turns WHERE session_id=:session AND repo=:repo "
                "ORDER BY id DESC LIMIT :keep)",
                {**mine, "keep": keep},
            )

        self._db.write(insert)
