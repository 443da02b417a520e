"""The cluster route's table: a label per unit of a repository, and the clustering's score."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from coderag.store.sqlite import Database


def clustered(db: Database, repo: str) -> set[str]:
    """Ids of the units that have a cluster label."""
    return {r["unit_id"] for r in db.read("SELECT unit_id FROM clusters WHERE repo=?", (repo,))}


def labels(db: Database, repo: str) -> dict[str, int]:
    """Cluster label by unit id."""
    rows = db.read("SELECT unit_id, label FROM clusters WHERE repo=?", (repo,))
    return {r["unit_id"]: r["label"] for r in rows}


def replace(
    db: Database, repo: str, labels: Sequence[tuple[str, int]], score: float | None
) -> None:
    """Set the repository's (unit id, label) pairs and silhouette score, all at once."""

    def txn(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM clusters WHERE repo=?", (repo,))
        conn.executemany(
            "INSERT INTO clusters (repo, unit_id, label) VALUES (?,?,?)",
            [(repo, uid, label) for uid, label in labels],
        )
        conn.execute("UPDATE repos SET silhouette=? WHERE name=?", (score, repo))

    db.write(txn)
