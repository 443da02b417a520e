"""The ``symbols`` table: definitions by name, kind and qualified name."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coderag.store.database import Database, Tx, insert_sql

SYMBOL_FIELDS = ("repo", "file", "name", "qualified", "kind", "start_line", "end_line", "unit_id")
"""Columns of a symbol row."""


@dataclass(frozen=True)
class Symbol:
    """One definition: its name, qualified name, kind, place and the unit holding it (None
    for a definition outside any unit)."""

    name: str
    qualified: str
    kind: str
    file: str
    start_line: int
    end_line: int
    unit_id: str | None


@dataclass(frozen=True)
class Definition:
    """A symbol defined inside a unit: its name and qualified name."""

    unit_id: str
    name: str
    qualified: str


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class Symbols:
    """Reads of the symbol table (``catalog.symbols``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def starting_with(self, repo: str, prefix: str, kind: str | None, limit: int) -> list[Symbol]:
        """Definitions whose name starts with ``prefix`` (case-insensitive), of ``kind`` when
        given, by name then file."""
        # LIKE is case-insensitive in SQLite and case-sensitive in PostgreSQL: compare lower cases
        sql = (
            "SELECT name, qualified, kind, file, start_line, end_line, unit_id FROM symbols "
            "WHERE repo=:repo AND LOWER(name) LIKE LOWER(:prefix) ESCAPE '\\'"
        )
        params: dict[str, object] = {"repo": repo, "prefix": _like_prefix(prefix), "limit": limit}
        if kind:
            sql += " AND kind=:kind"
            params["kind"] = kind
        return [
            Symbol(*r) for r in self._db.read(sql + " ORDER BY name, file LIMIT :limit", params)
        ]

    def defined(self, repo: str) -> list[Definition]:
        """Every symbol defined inside a unit."""
        rows = self._db.read(
            "SELECT unit_id, name, qualified FROM symbols WHERE repo=:repo AND unit_id IS NOT NULL",
            {"repo": repo},
        )
        return [Definition(*r) for r in rows]

    def defined_in(self, repo: str, file: str) -> list[Definition]:
        """Every symbol defined inside a unit of one file."""
        rows = self._db.read(
            "SELECT unit_id, name, qualified FROM symbols WHERE repo=:repo AND file=:file "
            "AND unit_id IS NOT NULL",
            {"repo": repo, "file": file},
        )
        return [Definition(*r) for r in rows]

    def most_called(self, repo: str, limit: int) -> list[Symbol]:
        """Functions, methods and classes outside tests that the most call sites name (names
        of four or more characters, none private), most first: a repository's landmarks."""
        rows = self._db.read(
            "SELECT s.name, s.qualified, s.kind, s.file, s.start_line, s.end_line, s.unit_id "
            "FROM symbols s JOIN units u ON u.id = s.unit_id "
            "JOIN calls c ON c.repo = s.repo AND c.callee = s.name "
            "WHERE s.repo=:repo AND s.kind IN ('function', 'method', 'class') AND u.is_test=0 "
            "AND LENGTH(s.name) >= 4 AND SUBSTR(s.name, 1, 1) <> '_' "
            "GROUP BY s.name, s.qualified, s.kind, s.file, s.start_line, s.end_line, s.unit_id "
            "ORDER BY COUNT(*) DESC, s.qualified LIMIT :limit",
            {"repo": repo, "limit": limit},
        )
        return [Symbol(*r) for r in rows]

    def unit_of(self, repo: str, qualified: str) -> str | None:
        """The id of the unit defining a qualified name, None when none does; of several (a
        Python ``@overload`` stub before its implementation, a declaration beside its code),
        the longest, which holds the code (the fifth trial's ``/calls`` showed a stub)."""
        rows = self._db.read(
            "SELECT unit_id FROM symbols WHERE repo=:repo AND qualified=:qualified "
            "AND unit_id IS NOT NULL ORDER BY end_line - start_line DESC, file, start_line",
            {"repo": repo, "qualified": qualified},
        )
        return rows[0]["unit_id"] if rows else None


def insert(conn: Tx, repo: str, rows: Iterable[tuple[Any, ...]]) -> None:
    """Add a file's definitions: (file, name, qualified, kind, start, end, unit_id) each."""
    conn.executemany(
        insert_sql("symbols", SYMBOL_FIELDS),
        [dict(zip(SYMBOL_FIELDS, (repo, *row), strict=True)) for row in rows],
    )
