"""The audit table: one row per search, ask, retrieve or MCP call."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from coderag.store.sqlite import Database

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
"""The columns a call writes (the id and timestamp are the database's)."""


def insert(db: Database, row: Sequence[object]) -> None:
    """Append one row, its values in ``COLUMNS`` order."""
    marks = ",".join("?" * len(COLUMNS))
    sql = f"INSERT INTO audit ({', '.join(COLUMNS)}) VALUES ({marks})"
    db.write(lambda conn: conn.execute(sql, tuple(row)))


def rows(
    db: Database, columns: Sequence[str], since: str | None, until: str | None
) -> list[sqlite3.Row]:
    """The rows with since <= ts < until (either bound may be absent), oldest first."""
    sql = f"SELECT {', '.join(columns)} FROM audit WHERE 1=1"
    params: list[str] = []
    if since:
        sql += " AND ts >= ?"
        params.append(since)
    if until:
        sql += " AND ts < ?"
        params.append(until)
    return db.read(sql + " ORDER BY id", tuple(params))
