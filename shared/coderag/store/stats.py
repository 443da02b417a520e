"""Index statistics of a repository (for its health report): unit sizes and file count."""

from __future__ import annotations

from dataclasses import dataclass

from coderag.store.database import Database


@dataclass(frozen=True)
class UnitStats:
    """A repository's units: how many, their mean lines and characters, how many are empty."""

    n: int
    lines: float
    chars: float
    empty: int


class Stats:
    """Figures over the ``units`` and ``files`` tables (``catalog.stats``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def unit_stats(self, repo: str) -> UnitStats:
        """Units of a repository: count, mean lines, mean characters, empty ones."""
        # the casts: PostgreSQL's AVG of integers is a NUMERIC (a Decimal in Python)
        row = self._db.read(
            "SELECT COUNT(*) AS n, "
            "CAST(COALESCE(AVG(end_line - start_line + 1), 0) AS DOUBLE PRECISION) AS lines, "
            "CAST(COALESCE(AVG(LENGTH(text)), 0) AS DOUBLE PRECISION) AS chars, "
            "COALESCE(SUM(CASE WHEN TRIM(text) = '' THEN 1 ELSE 0 END), 0) AS empty "
            "FROM units WHERE repo=:repo",
            {"repo": repo},
        )[0]
        return UnitStats(int(row[0]), float(row[1]), float(row[2]), int(row[3]))

    def file_count(self, repo: str) -> int:
        """Distinct indexed files of a repository."""
        rows = self._db.read(
            "SELECT COUNT(DISTINCT path) AS n FROM files WHERE repo=:repo", {"repo": repo}
        )
        n: int = rows[0]["n"]
        return n
