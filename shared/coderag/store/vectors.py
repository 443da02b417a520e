"""Chroma: one cosine collection per repository and vector space (one per encoder), embedded by
default or a server in compose.

Embeddings are always passed in, never computed by Chroma (its default function reaches the
network), and a collection is dropped whole with its repository so no vector is orphaned.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from coderag.errors import Unavailable

COLLECTION_PREFIX = "repo_"
"""Collection name of repository ``r`` in the main space (``vector``) is ``repo_r``."""

SPACE_PREFIXES = {"vector": COLLECTION_PREFIX, "vector2": "vector2_"}
"""Collection-name prefix per vector space (distinct, so no two collections share a name)."""


def make_client(chroma_url: str | None, data_dir: Path) -> Any:
    """A Chroma client: HttpClient when a server URL is set, else PersistentClient in data_dir."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if chroma_url:
        parsed = urlparse(chroma_url)
        return chromadb.HttpClient(
            host=parsed.hostname or "localhost",
            port=parsed.port or 8000,
            ssl=parsed.scheme == "https",
            settings=chroma_settings,
        )
    return chromadb.PersistentClient(path=str(data_dir / "chroma"), settings=chroma_settings)


class VectorStore:
    """Upsert, query and delete unit vectors of each repository."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._lock = threading.Lock()

    def _collection(self, repo: str, create: bool = True, space: str = "vector") -> Any:
        name = SPACE_PREFIXES[space] + repo
        try:
            if create:
                return self.client.get_or_create_collection(
                    name, metadata={"hnsw:space": "cosine"}, embedding_function=None
                )
            return self.client.get_collection(name, embedding_function=None)
        except Exception as exc:
            if not create:
                return None
            raise Unavailable(f"Chroma is not reachable: {exc}") from exc

    def upsert(
        self,
        repo: str,
        ids: Sequence[str],
        vectors: Sequence[Sequence[float]],
        metadatas: Sequence[dict[str, Any]],
        space: str = "vector",
    ) -> None:
        """Write vectors with their metadata, replacing any with the same id."""
        if not ids:
            return
        col = self._collection(repo, space=space)
        step = 2000
        for i in range(0, len(ids), step):
            col.upsert(
                ids=list(ids[i : i + step]),
                embeddings=[list(map(float, v)) for v in vectors[i : i + step]],
                metadatas=list(metadatas[i : i + step]),
            )

    def delete(self, repo: str, ids: Sequence[str], space: str = "vector") -> None:
        """Delete vectors by unit id."""
        col = self._collection(repo, create=False, space=space)
        if col is not None and ids:
            col.delete(ids=list(ids))

    def query(
        self, repo: str, vector: Sequence[float], n: int, space: str = "vector"
    ) -> list[tuple[str, float]]:
        """Nearest units as (id, cosine similarity), best first."""
        col = self._collection(repo, create=False, space=space)
        if col is None:
            return []
        count = col.count()
        if count == 0:
            return []
        res = col.query(
            query_embeddings=[list(map(float, vector))],
            n_results=min(n, count),
            include=["distances"],
        )
        return [(i, 1.0 - d) for i, d in zip(res["ids"][0], res["distances"][0], strict=True)]

    def ids(self, repo: str, space: str = "vector") -> set[str]:
        """Every vector id stored for a repository."""
        col = self._collection(repo, create=False, space=space)
        if col is None:
            return set()
        return set(col.get(include=[])["ids"])

    def count(self, repo: str, space: str = "vector") -> int:
        """Number of vectors stored for a repository."""
        col = self._collection(repo, create=False, space=space)
        return 0 if col is None else col.count()

    def dimension(self, repo: str, space: str = "vector") -> int | None:
        """Length of the repository's vectors in one space, or None when it has none."""
        col = self._collection(repo, create=False, space=space)
        if col is None:
            return None
        got = col.get(limit=1, include=["embeddings"])["embeddings"]
        return None if got is None or len(got) == 0 else len(got[0])

    def drop(self, repo: str, space: str | None = None) -> None:
        """Delete the repository's collection in one space, or in every space."""
        with self._lock:
            for name in [space] if space else SPACE_PREFIXES:
                if self._collection(repo, create=False, space=name) is not None:
                    self.client.delete_collection(SPACE_PREFIXES[name] + repo)

    def heartbeat(self) -> bool:
        """Whether Chroma answers."""
        try:
            self.client.heartbeat()
            return True
        except Exception:
            return False
