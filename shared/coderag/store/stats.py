"""Index statistics of a repository (for its health report): unit sizes and file count."""

from __future__ import annotations

from coderag.store.database import Database, Row


def unit_stats(db: Database, repo: str) -> Row:
    """Units of a repository: count ``n``, mean ``lines``, mean ``chars``, ``empty`` ones."""
    # the casts: PostgreSQL's AVG of integers is a NUMERIC (a Decimal in Python)
    return db.read(
        "SELECT COUNT(*) AS n, "
        "CAST(COALESCE(AVG(end_line - start_line + 1), 0) AS DOUBLE PRECISION) AS lines, "
        "CAST(COALESCE(AVG(LENGTH(text)), 0) AS DOUBLE PRECISION) AS chars, "
        "COALESCE(SUM(CASE WHEN TRIM(text) = '' THEN 1 ELSE 0 END), 0) AS empty "
        "FROM units WHERE repo=:repo",
        {"repo": repo},
    )[0]


def file_count(db: Database, repo: str) -> int:
    """Distinct indexed files of a repository."""
    rows = db.read("SELECT COUNT(DISTINCT path) AS n FROM files WHERE repo=:repo", {"repo": repo})
    n: int = rows[0]["n"]
    return n
