"""Both default encoders run their CPU forward as a traced graph: the same bits as the eager
model, padded batches masked as the eager model masks them, and queries from many threads at
once get the vectors they get one at a time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from coderag.settings import Settings
from coderag_embedder.encoder import get_encoders
from tests.test_e5_small import LONG, SHORT, code

QUERIES = [
    "how are orders created",
    "订单是在哪里创建的？",
    "where are users loaded from the database when the cache misses",
    "router 405 vs 404",
]


def eager(enc: Any, texts: list[str], query: bool = False) -> np.ndarray:
    """Vectors of ``texts`` with the encoder's graph switched off."""
    graph, enc.forward.graph = enc.forward.graph, None
    try:
        return enc.encode_query(texts) if query else enc.encode(texts)
    finally:
        enc.forward.graph = graph


@pytest.mark.parametrize("space", ["vector", "vector2"])
def test_the_graph_gives_the_eager_models_bits(space: str) -> None:
    enc = get_encoders()[space]
    assert enc.forward.graph is not None  # CPU: traced at load
    texts = [*code()[:12], SHORT, LONG]
    assert np.array_equal(enc.encode(texts), eager(enc, texts))
    for q in QUERIES:  # one per call, as /search asks
        assert np.array_equal(enc.encode_query([q]), eager(enc, [q], query=True))


def test_concurrent_queries_get_their_own_vectors() -> None:
    encoders = get_encoders()
    alone = {s: [e.encode_query([q])[0] for q in QUERIES] for s, e in encoders.items()}
    jobs = [(s, i) for s in encoders for i in range(len(QUERIES))] * 6
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda j: encoders[j[0]].encode_query([QUERIES[j[1]]])[0], jobs))
    for (space, i), vec in zip(jobs, got, strict=True):
        assert np.array_equal(vec, alone[space][i])


@pytest.mark.slow
@pytest.mark.parametrize("space", ["vector", "vector2"])
def test_a_padded_batch_is_masked(space: str) -> None:
    # fp32 batches texts together, so the shorter ones are padded: a graph that baked in the
    # unpadded example's mask would let them attend to the padding
    enc = get_encoders(Settings(embed_precision="fp32"))[space]  # type: ignore[arg-type]
    assert enc.batch_size > 1 and enc.forward.graph is not None
    texts = [SHORT, LONG, "x = 1"]
    together = enc.encode(texts)
    for i, text in enumerate(texts):
        assert np.allclose(together[i], enc.encode([text])[0], atol=1e-5)
