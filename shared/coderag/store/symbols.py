"""The symbol table: definitions by name, kind and qualified name."""

from __future__ import annotations

from coderag.store.database import Database, Row


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def starting_with(db: Database, repo: str, prefix: str, kind: str | None, limit: int) -> list[Row]:
    """Definitions whose name starts with ``prefix`` (case-insensitive), of ``kind`` when given,
    by name then file."""
    # LIKE is case-insensitive in SQLite and case-sensitive in PostgreSQL: compare lower cases
    sql = "SELECT * FROM symbols WHERE repo=:repo AND LOWER(name) LIKE LOWER(:prefix) ESCAPE '\\'"
    params: dict[str, object] = {"repo": repo, "prefix": _like_prefix(prefix), "limit": limit}
    if kind:
        sql += " AND kind=:kind"
        params["kind"] = kind
    return db.read(sql + " ORDER BY name, file LIMIT :limit", params)


def defined(db: Database, repo: str) -> list[Row]:
    """(name, qualified, unit_id) of every symbol defined inside a unit."""
    return db.read(
        "SELECT name, qualified, unit_id FROM symbols WHERE repo=:repo AND unit_id IS NOT NULL",
        {"repo": repo},
    )


def defined_in(db: Database, repo: str, file: str) -> list[Row]:
    """(name, qualified, unit_id) of every symbol defined inside a unit of one file."""
    return db.read(
        "SELECT name, qualified, unit_id FROM symbols WHERE repo=:repo AND file=:file "
        "AND unit_id IS NOT NULL",
        {"repo": repo, "file": file},
    )


def unit_of(db: Database, repo: str, qualified: str) -> str | None:
    """The id of the unit defining a qualified name, None when none does."""
    rows = db.read(
        "SELECT unit_id FROM symbols WHERE repo=:repo AND qualified=:qualified "
        "AND unit_id IS NOT NULL",
        {"repo": repo, "qualified": qualified},
    )
    return rows[0]["unit_id"] if rows else None
