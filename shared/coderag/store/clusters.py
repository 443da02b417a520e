"""The cluster route's table: a label per unit of a repository (its silhouette score is on the
repository's row, ``coderag.store.repos``)."""

from __future__ import annotations

from collections.abc import Sequence

from coderag.store import repos
from coderag.store.database import Database, Tx


class Clusters:
    """The ``clusters`` table (``catalog.clusters``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def clustered(self, repo: str) -> set[str]:
        """Ids of the units that have a cluster label."""
        rows = self._db.read("SELECT unit_id FROM clusters WHERE repo=:repo", {"repo": repo})
        return {r["unit_id"] for r in rows}

    def labels(self, repo: str) -> dict[str, int]:
        """Cluster label by unit id."""
        rows = self._db.read("SELECT unit_id, label FROM clusters WHERE repo=:repo", {"repo": repo})
        return {r["unit_id"]: r["label"] for r in rows}

    def replace(self, repo: str, labels: Sequence[tuple[str, int]], score: float | None) -> None:
        """Set the repository's (unit id, label) pairs and silhouette score, all at once."""

        def txn(conn: Tx) -> None:
            conn.execute("DELETE FROM clusters WHERE repo=:repo", {"repo": repo})
            conn.executemany(
                "INSERT INTO clusters (repo, unit_id, label) VALUES (:repo, :unit, :label)",
                [{"repo": repo, "unit": uid, "label": label} for uid, label in labels],
            )
            repos.set_silhouette(conn, repo, score)

        self._db.write(txn)
