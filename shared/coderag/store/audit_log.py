"""The audit table: one row per search, ask, retrieve or MCP call."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from coderag.store.database import Database, Row

COLUMNS = (
    "user",
    "endpoint",
    "repo",
    "query",
    "retrieved_files",
    "llm_input_tokens",
    "response_ms",
    "status",
)
"""The columns a call writes (the id is the database's, the timestamp the time of the insert)."""


def quoted(column: str) -> str:
    """A column name quoted for SQL (``user`` is a reserved word in PostgreSQL)."""
    return f'"{column}"'


def now_ts() -> str:
    """The current UTC time as the log writes it: ISO 8601 with milliseconds and a Z."""
    now = datetime.now(UTC)
    return f"{now:%Y-%m-%dT%H:%M:%S}.{now.microsecond // 1000:03d}Z"


def insert(db: Database, row: Sequence[object]) -> None:
    """Append one row, its values in ``COLUMNS`` order, stamped with the current time."""
    names = ", ".join(quoted(c) for c in ("ts", *COLUMNS))
    marks = ", ".join(f":{c}" for c in ("ts", *COLUMNS))
    sql = f"INSERT INTO audit ({names}) VALUES ({marks})"
    params = {"ts": now_ts(), **dict(zip(COLUMNS, row, strict=True))}
    db.write(lambda conn: conn.execute(sql, params))


def rows(db: Database, columns: Sequence[str], since: str | None, until: str | None) -> list[Row]:
    """The rows with since <= ts < until (either bound may be absent), oldest first."""
    sql = f"SELECT {', '.join(quoted(c) for c in columns)} FROM audit WHERE 1=1"
    params: dict[str, str] = {}
    if since:
        sql += " AND ts >= :since"
        params["since"] = since
    if until:
        sql += " AND ts < :until"
        params["until"] = until
    return db.read(sql + " ORDER BY id", params)
