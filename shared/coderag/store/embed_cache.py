"""The embedder's content-hash cache: vectors by encoder fingerprint and text hash."""

from __future__ import annotations

from collections.abc import Iterable

from coderag.store.sqlite import Database

CHUNK = 500
"""Hashes asked per query (SQLite's variable limit is far above it)."""


def lookup(db: Database, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
    """The stored vector bytes of the given content hashes under ``model``."""
    found: dict[str, bytes] = {}
    unique = sorted(set(hashes))
    for i in range(0, len(unique), CHUNK):
        chunk = unique[i : i + CHUNK]
        marks = ",".join("?" * len(chunk))
        rows = db.read(
            "SELECT content_hash, vector FROM embed_cache "
            f"WHERE model=? AND content_hash IN ({marks})",
            (model, *chunk),
        )
        found.update((row["content_hash"], row["vector"]) for row in rows)
    return found


def store(db: Database, model: str, vectors: dict[str, bytes]) -> None:
    """Remember vector bytes by content hash under ``model``."""
    rows = [(model, h, v) for h, v in vectors.items()]
    if rows:
        db.write(
            lambda conn: conn.executemany(
                "INSERT OR REPLACE INTO embed_cache (model, content_hash, vector) VALUES (?,?,?)",
                rows,
            )
        )
