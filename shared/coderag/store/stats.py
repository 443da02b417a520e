"""Index statistics of a repository (for its health report): unit sizes and file count."""

from __future__ import annotations

import sqlite3

from coderag.store.sqlite import Database


def unit_stats(db: Database, repo: str) -> sqlite3.Row:
    """Units of a repository: count ``n``, mean ``lines``, mean ``chars``, ``empty`` ones."""
    return db.read(
        "SELECT COUNT(*) AS n, COALESCE(AVG(end_line - start_line + 1), 0) AS lines, "
        "COALESCE(AVG(LENGTH(text)), 0) AS chars, "
        "COALESCE(SUM(CASE WHEN TRIM(text) = '' THEN 1 ELSE 0 END), 0) AS empty "
        "FROM units WHERE repo=?",
        (repo,),
    )[0]


def file_count(db: Database, repo: str) -> int:
    """Distinct indexed files of a repository."""
    return db.read("SELECT COUNT(DISTINCT path) AS n FROM files WHERE repo=?", (repo,))[0]["n"]
