"""Content-hash cache of vectors: a unit whose embedded text did not change is never re-encoded."""

from __future__ import annotations

import sqlite3

import numpy as np

from coderag.store import Catalog


def lookup(catalog: Catalog, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
    """Cached vectors of the given content hashes under an encoder's fingerprint."""
    found: dict[str, np.ndarray] = {}
    unique = sorted(set(hashes))
    for i in range(0, len(unique), 500):
        chunk = unique[i : i + 500]
        marks = ",".join("?" * len(chunk))
        rows = catalog.db.read(
            "SELECT content_hash, vector FROM embed_cache "
            f"WHERE model=? AND content_hash IN ({marks})",
            (model, *chunk),
        )
        for row in rows:
            found[row["content_hash"]] = np.frombuffer(row["vector"], dtype=np.float32)
    return found


def store(catalog: Catalog, model: str, vectors: dict[str, np.ndarray]) -> None:
    """Remember vectors by content hash."""
    rows = [(model, h, v.astype(np.float32).tobytes()) for h, v in vectors.items()]

    def insert(conn: sqlite3.Connection) -> None:
        conn.executemany(
            "INSERT OR REPLACE INTO embed_cache (model, content_hash, vector) VALUES (?,?,?)", rows
        )

    if rows:
        catalog.db.write(insert)
