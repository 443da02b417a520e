"""The same question ranks the same way in every process: Python salts string hashes per process,
so a route that walks a set of query words breaks score ties differently each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import importlib
import json
from types import SimpleNamespace

symbol = importlib.import_module("coderag_retriever.routes.symbol")

words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
index = SimpleNamespace(
    by_symbol_token={w: [i] for i, w in enumerate(words)},
    symbol_vocabulary=sorted(words),
    symbol_tokens=[frozenset({w}) for w in words],
    units=[SimpleNamespace(symbol=f"{w}_handler") for w in words],
)
query = SimpleNamespace(tokens=list(reversed(words)), lowered=" ".join(words))
print(json.dumps(symbol.rank(query, index, 8)))
"""


def _ranking(seed: int) -> list:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.slow
def test_symbol_route_breaks_ties_the_same_in_every_process() -> None:
    rankings = [_ranking(seed) for seed in (1, 2, 3, 4, 5)]
    assert all(r == rankings[0] for r in rankings), rankings
    # every word matches one unit equally well: ties fall to the units' order in the index
    assert [pos for pos, _ in rankings[0]] == list(range(8))


def test_vector_queries_search_wide_enough_to_find_the_nearest(tmp_path) -> None:
    """A collection made with Chroma's default search breadth is widened on first use, and the
    route's 50 nearest are then the exact 50 nearest (an approximate search that misses some
    returns other ones after a restart)."""
    import numpy as np

    from coderag.store.vectors import SEARCH_EF, VectorStore, collection_name, make_client

    client = make_client(None, tmp_path)
    old = client.create_collection(
        collection_name("big", "vector", ""), metadata={"hnsw:space": "cosine", "repo": "big"}
    )
    assert old.configuration_json["hnsw"]["ef_search"] < SEARCH_EF
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(3000, 64)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"u{i}" for i in range(len(vectors))]
    store = VectorStore(client)
    store.upsert("big", ids, vectors, [{"file": "f"} for _ in ids])
    reopened = client.get_collection(collection_name("big", "vector", ""))
    assert reopened.configuration_json["hnsw"]["ef_search"] == SEARCH_EF
    found = []
    for q in vectors[:20]:
        exact = {ids[i] for i in np.argsort(-(vectors @ q))[:50]}
        found.append(len(exact & {u for u, _ in store.query("big", q, 50)}) / 50)
    assert min(found) >= 0.98, found


def test_the_search_breadth_is_a_setting(tmp_path, monkeypatch) -> None:
    """``CODERAG_VECTOR_SEARCH_EF`` reaches the store and is written into the collections it
    searches (benchmarks set it rather than a constant of the project)."""
    import numpy as np

    from coderag.settings import get_settings
    from coderag.store import get_vectors
    from coderag.store.vectors import SEARCH_EF, collection_name

    monkeypatch.setenv("CODERAG_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CODERAG_VECTOR_SEARCH_EF", "64")
    get_settings.cache_clear()
    try:
        store = get_vectors()
        assert store.search_ef == 64 != SEARCH_EF
        vectors = np.eye(4, 8, dtype=np.float32)
        store.upsert("small", ["a", "b", "c", "d"], vectors, [{"file": "f"}] * 4)
        assert [u for u, _ in store.query("small", vectors[2], 1)] == ["c"]
        col = store.client.get_collection(collection_name("small", "vector", ""))
        assert col.configuration_json["hnsw"]["ef_search"] == 64
    finally:
        get_settings.cache_clear()
