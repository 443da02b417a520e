"""The audit table: one row per user request (a search, an ask, a chat, an MCP call, or a direct
/retrieve)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from coderag.store.database import Database

COLUMNS = (
    "user",
    "endpoint",
    "repo",
    "query",
    "retrieved_files",
    "llm_input_tokens",
    "response_ms",
    "status",
    "refusal",
    "cited",
)
"""The columns a call writes (the id is the database's, the timestamp the time of the insert);
new columns go last, so the CSV export keeps its earlier columns where they were."""


def quoted(column: str) -> str:
    """A column name quoted for SQL (``user`` is a reserved word in PostgreSQL)."""
    return f'"{column}"'


def now_ts() -> str:
    """The current UTC time as the log writes it: ISO 8601 with milliseconds and a Z."""
    now = datetime.now(UTC)
    return f"{now:%Y-%m-%dT%H:%M:%S}.{now.microsecond // 1000:03d}Z"


class AuditLog:
    """The ``audit`` table (``catalog.audit_log``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def insert(self, row: Sequence[object]) -> None:
        """Append one row, its values in ``COLUMNS`` order, stamped with the current time."""
        names = ", ".join(quoted(c) for c in ("ts", *COLUMNS))
        marks = ", ".join(f":{c}" for c in ("ts", *COLUMNS))
        sql = f"INSERT INTO audit ({names}) VALUES ({marks})"
        params = {"ts": now_ts(), **dict(zip(COLUMNS, row, strict=True))}
        self._db.write(lambda conn: conn.execute(sql, params))

    def rows(
        self,
        columns: Sequence[str],
        since: str | None,
        until: str | None,
        user: str | None = None,
    ) -> list[dict[str, Any]]:
        """The rows with since <= ts < until (either bound may be absent) and, given ``user``,
        that user's only, oldest first, each as its ``columns`` by name."""
        sql = f"SELECT {', '.join(quoted(c) for c in columns)} FROM audit WHERE 1=1"
        params: dict[str, str] = {}
        if user is not None:
            sql += ' AND "user" = :user'
            params["user"] = user
        if since:
            sql += " AND ts >= :since"
            params["since"] = since
        if until:
            sql += " AND ts < :until"
            params["until"] = until
        found = self._db.read(sql + " ORDER BY id", params)
        return [dict(zip(columns, r, strict=True)) for r in found]
