"""The catalog and Chroma agree after a crash at any point: every vector carries the content hash
of the unit text it encodes, and the repair pass of each index fixes vectors that are missing,
orphaned, stale (an older text's vector under a current id) or without a hash."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.settings import get_settings
from coderag.store import get_catalog, get_vectors
from coderag.store.vectors import collection_name
from coderag_embedder.encoder import get_encoder


@pytest.fixture(autouse=True)
def one_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """One encoder is enough here; the second would only double the time."""
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()


def collection(repo: str):
    """The repository's Chroma collection, to corrupt directly."""
    name = collection_name(repo, "vector", get_catalog().registration(repo))
    return get_vectors().client.get_collection(name, embedding_function=None)


def test_repair_fixes_stale_hashless_missing_and_orphaned_vectors(sample_repo: Path) -> None:
    cat = get_catalog()
    cat.create_repo("agree", str(sample_repo), None, None)
    run_now(IndexRepo(repo="agree"))
    expected = cat.unit_hashes("agree")
    assert get_vectors().hashes("agree") == expected, "every vector carries its unit's hash"

    col = collection("agree")
    ids = sorted(expected)
    stale, hashless, missing = ids[0], ids[1], ids[2]
    got = col.get(ids=[stale, hashless], include=["embeddings", "metadatas"])
    good = {i: np.array(e) for i, e in zip(got["ids"], got["embeddings"], strict=True)}
    wrong = get_encoder().encode(["an older version of this function"])[0]
    meta = dict(got["metadatas"][got["ids"].index(stale)], content_hash="0" * 64)
    col.upsert(ids=[stale], embeddings=[wrong.tolist()], metadatas=[meta])
    bare = {k: v for k, v in got["metadatas"][got["ids"].index(hashless)].items()}
    bare.pop("content_hash")
    col.delete(ids=[hashless])  # written before vectors carried hashes (an upsert merges keys)
    col.add(ids=[hashless], embeddings=[wrong.tolist()], metadatas=[bare])
    col.delete(ids=[missing])
    col.upsert(ids=["orphan"], embeddings=[wrong.tolist()], metadatas=[{"file": "gone.py"}])

    out = run_now(IndexRepo(repo="agree"))  # nothing changed on disk: only the repair works
    assert out["files"] == []
    assert get_vectors().hashes("agree") == expected
    fixed = col.get(ids=[stale, hashless], include=["embeddings"])
    for i, e in zip(fixed["ids"], fixed["embeddings"], strict=True):
        assert np.allclose(np.array(e), good[i], atol=1e-5), f"{i}: the current text's vector"
    assert get_catalog().get_repo("agree").status == "ready"
