"""The cluster route's table: a label per unit of a repository, and the clustering's score."""

from __future__ import annotations

from collections.abc import Sequence

from coderag.store.database import Database, Tx


def clustered(db: Database, repo: str) -> set[str]:
    """Ids of the units that have a cluster label."""
    rows = db.read("SELECT unit_id FROM clusters WHERE repo=:repo", {"repo": repo})
    return {r["unit_id"] for r in rows}


def labels(db: Database, repo: str) -> dict[str, int]:
    """Cluster label by unit id."""
    rows = db.read("SELECT unit_id, label FROM clusters WHERE repo=:repo", {"repo": repo})
    return {r["unit_id"]: r["label"] for r in rows}


def replace(
    db: Database, repo: str, labels: Sequence[tuple[str, int]], score: float | None
) -> None:
    """Set the repository's (unit id, label) pairs and silhouette score, all at once."""

    def txn(conn: Tx) -> None:
        conn.execute("DELETE FROM clusters WHERE repo=:repo", {"repo": repo})
        conn.executemany(
            "INSERT INTO clusters (repo, unit_id, label) VALUES (:repo, :unit, :label)",
            [{"repo": repo, "unit": uid, "label": label} for uid, label in labels],
        )
        conn.execute(
            "UPDATE repos SET silhouette=:score WHERE name=:repo", {"score": score, "repo": repo}
        )

    db.write(txn)
