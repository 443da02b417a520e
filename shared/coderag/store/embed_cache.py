"""The embedder's content-hash cache: vectors by encoder fingerprint and text hash."""

from __future__ import annotations

from collections.abc import Iterable

from coderag.store.database import Database

CHUNK = 500
"""Hashes asked per query (far below SQLite's variable limit)."""


class EmbedCache:
    """The ``embed_cache`` table (``catalog.embed_cache``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def lookup(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        """The stored vector bytes of the given content hashes under ``model``."""
        found: dict[str, bytes] = {}
        unique = sorted(set(hashes))
        for i in range(0, len(unique), CHUNK):
            rows = self._db.read(
                "SELECT content_hash, vector FROM embed_cache "
                "WHERE model=:model AND content_hash IN :hashes",
                {"model": model, "hashes": unique[i : i + CHUNK]},
            )
            found.update((row["content_hash"], bytes(row["vector"])) for row in rows)
        return found

    def store(self, model: str, vectors: dict[str, bytes]) -> None:
        """Remember vector bytes by content hash under ``model``."""
        rows = [{"model": model, "hash": h, "vector": v} for h, v in vectors.items()]
        if rows:
            self._db.write(
                lambda conn: conn.executemany(
                    "INSERT INTO embed_cache (model, content_hash, vector) VALUES "
                    "(:model, :hash, :vector) ON CONFLICT (model, content_hash) "
                    "DO UPDATE SET vector=excluded.vector",
                    rows,
                )
            )

    def clear(self) -> None:
        """Forget every cached vector (the next index encodes from scratch, as a first one)."""
        self._db.write(lambda conn: conn.execute("DELETE FROM embed_cache"))
