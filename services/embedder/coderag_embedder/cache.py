"""Content-hash cache of vectors: a unit whose embedded text did not change is never re-encoded."""

from __future__ import annotations

import numpy as np

from coderag.store import Catalog


def lookup(catalog: Catalog, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
    """Cached vectors of the given content hashes under an encoder's fingerprint."""
    found = catalog.embed_cache.lookup(model, hashes)
    return {h: np.frombuffer(v, dtype=np.float32) for h, v in found.items()}


def store(catalog: Catalog, model: str, vectors: dict[str, np.ndarray]) -> None:
    """Remember vectors by content hash."""
    catalog.embed_cache.store(
        model, {h: v.astype(np.float32).tobytes() for h, v in vectors.items()}
    )
