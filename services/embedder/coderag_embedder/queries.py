"""What the embedder offers the retriever in one process: query vectors per vector space and
cross-encoder scores (the same functions its ``/embed`` routes serve in compose)."""

from __future__ import annotations

import numpy as np

from coderag.embedding import LocalEmbedder
from coderag_embedder.encoder import get_encoders
from coderag_embedder.rerank import score


def spaces() -> list[str]:
    """The vector spaces an encoder feeds under the current settings."""
    return list(get_encoders())


def embed_queries(space: str, texts: list[str]) -> np.ndarray | None:
    """Query vectors of one space (through the priority gate: never behind an indexing batch);
    None when no encoder feeds it."""
    encoder = get_encoders().get(space)
    return None if encoder is None else encoder.encode_query(list(texts))


def local() -> LocalEmbedder:
    """The in-process embedder the composition root installs."""
    return LocalEmbedder(spaces, embed_queries, score)
