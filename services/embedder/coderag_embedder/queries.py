"""What the embedder offers the retriever in one process: query vectors per vector space and
cross-encoder scores (the same functions its ``/embed`` routes serve in compose)."""

from __future__ import annotations

from typing import Any

import numpy as np

from coderag.embedding import LocalEmbedder
from coderag.settings import get_settings
from coderag.spaces import UNSAFE
from coderag_embedder import unsafe
from coderag_embedder.encoder import converted_e5, get_encoders
from coderag_embedder.rerank import score


def unsafe_reader() -> Any | None:
    """The unsafe-request reader beside the ``vector2`` encoder, where
    ``CODERAG_UNSAFE_RULE=tuned`` chooses it and both are there."""
    if get_settings().unsafe_rule != "tuned":
        return None  # its 85 MB only where the rule is chosen
    encoder = get_encoders().get("vector2")
    if encoder is None or not unsafe.ADAPTER.is_file():
        return None
    return unsafe.reader(encoder, converted_e5(), get_settings().device)


def spaces() -> list[str]:
    """The vector spaces an encoder feeds under the current settings, and ``unsafe`` (query
    vectors only) where its reader loads."""
    names = list(get_encoders())
    return [*names, UNSAFE] if unsafe_reader() is not None else names


def encoder_of(space: str) -> Any | None:
    """The encoder of a space (the reader for ``unsafe``); None when none feeds it."""
    return unsafe_reader() if space == UNSAFE else get_encoders().get(space)


def embed_queries(space: str, texts: list[str]) -> np.ndarray | None:
    """Query vectors of one space (through the priority gate: never behind an indexing batch);
    None when no encoder feeds it."""
    encoder = encoder_of(space)
    return None if encoder is None else encoder.encode_query(list(texts))


def local() -> LocalEmbedder:
    """The in-process embedder the composition root installs."""
    return LocalEmbedder(spaces, embed_queries, score)
