"""The symbol table: definitions by name, kind and qualified name."""

from __future__ import annotations

import sqlite3

from coderag.store.sqlite import Database


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def starting_with(
    db: Database, repo: str, prefix: str, kind: str | None, limit: int
) -> list[sqlite3.Row]:
    """Definitions whose name starts with ``prefix`` (case-insensitive), of ``kind`` when given,
    by name then file."""
    sql = "SELECT * FROM symbols WHERE repo=? AND name LIKE ? ESCAPE '\\'"
    params: list[object] = [repo, _like_prefix(prefix)]
    if kind:
        sql += " AND kind=?"
        params.append(kind)
    return db.read(sql + " ORDER BY name, file LIMIT ?", (*params, limit))


def defined(db: Database, repo: str) -> list[sqlite3.Row]:
    """(name, qualified, unit_id) of every symbol defined inside a unit."""
    return db.read(
        "SELECT name, qualified, unit_id FROM symbols WHERE repo=? AND unit_id IS NOT NULL", (repo,)
    )


def defined_in(db: Database, repo: str, file: str) -> list[sqlite3.Row]:
    """(name, qualified, unit_id) of every symbol defined inside a unit of one file."""
    return db.read(
        "SELECT name, qualified, unit_id FROM symbols WHERE repo=? AND file=? "
        "AND unit_id IS NOT NULL",
        (repo, file),
    )


def unit_of(db: Database, repo: str, qualified: str) -> str | None:
    """The id of the unit defining a qualified name, None when none does."""
    rows = db.read(
        "SELECT unit_id FROM symbols WHERE repo=? AND qualified=? AND unit_id IS NOT NULL",
        (repo, qualified),
    )
    return rows[0]["unit_id"] if rows else None
