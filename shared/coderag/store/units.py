"""The ``units`` table: the parser's semantic units of each indexed file."""

from __future__ import annotations

import json
from collections.abc import Iterable

from coderag.schemas import Unit
from coderag.store.database import Database, Row, Tx

UNIT_FIELDS = (
    "id", "repo", "file", "start_line", "end_line", "symbol", "kind", "language", "signature",
    "doc", "text", "is_test", "content_hash", "facts", "last_commit", "last_author", "last_date",
)  # fmt: skip
"""Columns of a unit, in the order they are written and read."""

UNIT_COLUMNS = ", ".join(UNIT_FIELDS)
"""The unit columns as a SELECT list."""

_UPSERT_UNIT = (
    f"INSERT INTO units ({UNIT_COLUMNS}) VALUES ({', '.join(':' + c for c in UNIT_FIELDS)}) "
    "ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in UNIT_FIELDS if c != "id")
)

IDS_PER_QUERY = 500
"""Unit ids asked per query (far below SQLite's variable limit)."""


def unit_from_row(row: Row) -> Unit:
    """Rebuild a Unit from a ``units`` row."""
    return Unit(
        repo=row["repo"],
        file=row["file"],
        start_line=row["start_line"],
        end_line=row["end_line"],
        symbol=row["symbol"],
        kind=row["kind"],
        language=row["language"],
        signature=row["signature"],
        doc=row["doc"],
        text=row["text"],
        is_test=bool(row["is_test"]),
        facts=json.loads(row["facts"]),
        last_commit=row["last_commit"],
        last_author=row["last_author"],
        last_date=row["last_date"],
    )


class Units:
    """Reads of the ``units`` table (a part of ``Catalog``)."""

    db: Database

    def units(self, repo: str, files: Iterable[str] | None = None) -> list[Unit]:
        """Units of a repository, optionally only of some files, in file and line order."""
        if files is None:
            rows = self.db.read(
                f"SELECT {UNIT_COLUMNS} FROM units WHERE repo=:repo ORDER BY file, start_line",
                {"repo": repo},
            )
            return [unit_from_row(r) for r in rows]
        out: list[Unit] = []
        for path in files:
            rows = self.db.read(
                f"SELECT {UNIT_COLUMNS} FROM units WHERE repo=:repo AND file=:file "
                "ORDER BY start_line",
                {"repo": repo, "file": path},
            )
            out += [unit_from_row(r) for r in rows]
        return out

    def unit_ids(self, repo: str) -> set[str]:
        """Ids of a repository's units."""
        return {r[0] for r in self.db.read("SELECT id FROM units WHERE repo=:r", {"r": repo})}

    def unit_hashes(self, repo: str) -> dict[str, str]:
        """Unit id -> content hash of a repository's units (what its vectors must encode)."""
        rows = self.db.read("SELECT id, content_hash FROM units WHERE repo=:r", {"r": repo})
        return {r["id"]: r["content_hash"] for r in rows}

    def units_by_id(self, ids: Iterable[str]) -> dict[str, Unit]:
        """Units with the given ids."""
        ids = list(ids)
        out: dict[str, Unit] = {}
        for start in range(0, len(ids), IDS_PER_QUERY):
            chunk = ids[start : start + IDS_PER_QUERY]
            for row in self.db.read(
                f"SELECT {UNIT_COLUMNS} FROM units WHERE id IN :ids", {"ids": chunk}
            ):
                out[row["id"]] = unit_from_row(row)
        return out


# --- statements inside another module's transaction -----------------------------------------------


def upsert(conn: Tx, units: list[Unit]) -> None:
    """Write units, replacing those with the same id."""
    conn.executemany(_UPSERT_UNIT, [_unit_row(u) for u in units])


def ids_of_file(conn: Tx, repo: str, path: str) -> list[str]:
    """Ids of the units of one file."""
    rows = conn.execute(
        "SELECT id FROM units WHERE repo=:repo AND file=:file", {"repo": repo, "file": path}
    )
    return [r[0] for r in rows]


def set_last_commits(conn: Tx, repo: str, rows: list[tuple[str, str, str, str]]) -> None:
    """Record units' last commits: (unit id, commit, author, date)."""
    conn.executemany(
        "UPDATE units SET last_commit=:c, last_author=:a, last_date=:d WHERE id=:id AND repo=:repo",
        [{"c": c, "a": a, "d": d, "id": uid, "repo": repo} for uid, c, a, d in rows],
    )


def _unit_row(u: Unit) -> dict[str, object]:
    """A unit's parameters for ``_UPSERT_UNIT``."""
    values = (
        u.id,
        u.repo,
        u.file,
        u.start_line,
        u.end_line,
        u.symbol,
        u.kind,
        u.language,
        u.signature,
        u.doc,
        u.text,
        int(u.is_test),
        u.content_hash,
        json.dumps(u.facts, ensure_ascii=False),
        u.last_commit,
        u.last_author,
        u.last_date,
    )
    return dict(zip(UNIT_FIELDS, values, strict=True))
