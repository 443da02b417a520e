"""A collection larger than one Chroma ``get`` can return (its SQLite's variable limit, about
32k): the repair pass still reads every vector's id and content hash, in pages. Found by the
million-line scale run, whose 67k-unit repository failed there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coderag.store.vectors import PAGE, VectorStore, make_client

VECTORS = 40_000
"""More than Chroma answers in one unpaged get."""


@pytest.mark.slow
def test_every_vector_of_a_large_collection_is_read(tmp_path: Path) -> None:
    store = VectorStore(make_client(None, tmp_path), lambda repo: "r1")
    ids = [f"u{i}" for i in range(VECTORS)]
    vectors = np.random.default_rng(0).random((VECTORS, 4), dtype=np.float32)
    store.upsert("big", ids, vectors, [{"content_hash": f"h{i}"} for i in range(VECTORS)])
    assert VECTORS > 6 * PAGE
    hashes = store.hashes("big")
    assert len(hashes) == VECTORS and hashes["u39999"] == "h39999"
    assert store.ids("big") == set(ids)
