"""The catalog and Chroma agree after a crash at any point: every vector carries the content hash
of the unit text it encodes, and the repair pass of the next index after a chain that did not
finish fixes vectors that are missing, orphaned, stale (an older text's vector under a current
id) or without a hash. A chain that starts from matching collections writes only its own
changes: a one-file commit does not read every vector of the repository."""

from __future__ import annotations

from pathlib import Path

import git
import numpy as np
import pytest

from coderag.jobs import IndexRepo, Parsed
from coderag.queue import run_now
from coderag.settings import get_settings
from coderag.store import get_catalog, get_vectors
from coderag.store.vectors import VectorStore, collection_name
from coderag_embedder.encoder import get_encoder
from tests.conftest import commit_all


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
    # what a chain that died mid-write leaves behind: its mark, never made clean
    cat.chains.open_vector_chain("agree", "a-chain-that-died")

    out = run_now(IndexRepo(repo="agree"))  # nothing changed on disk: only the repair works
    assert isinstance(out, Parsed) and out.files == []
    assert get_vectors().hashes("agree") == expected
    fixed = col.get(ids=[stale, hashless], include=["embeddings"])
    for i, e in zip(fixed["ids"], fixed["embeddings"], strict=True):
        assert np.allclose(np.array(e), good[i], atol=1e-5), f"{i}: the current text's vector"
    assert get_catalog().get_repo("agree").status == "ready"


def test_a_chain_from_matching_collections_writes_only_its_changes(
    sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = get_catalog()
    cat.create_repo("steady", str(sample_repo), None, None)
    run_now(IndexRepo(repo="steady"))
    reads: list[str] = []
    whole = VectorStore.hashes

    def counted(self: VectorStore, repo: str, *args: object, **kwargs: object) -> dict:
        reads.append(repo)
        return whole(self, repo, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(VectorStore, "hashes", counted)
    target = next((sample_repo / "src").rglob("*.py"))
    target.write_text(target.read_text() + "\n\ndef added_later(x):\n    return x * 2\n")
    commit_all(git.Repo(sample_repo), "one file")
    out = run_now(IndexRepo(repo="steady"))
    assert isinstance(out, Parsed) and out.files == [str(target.relative_to(sample_repo))]
    assert reads == [], "a one-file commit read every vector of the repository"
    assert whole(get_vectors(), "steady") == cat.unit_hashes("steady")

    cat.chains.open_vector_chain("steady", "a-chain-that-died")
    run_now(IndexRepo(repo="steady"))
    assert reads == ["steady"], "after a chain that died, every vector is compared"
    assert whole(get_vectors(), "steady") == cat.unit_hashes("steady")


def test_a_query_after_its_collection_was_made_anew_reads_the_new_one() -> None:
    """Queries keep a collection's handle open; one dropped and written again under the same
    name (a repository's vectors rebuilt) is opened again, not read as gone."""
    store = get_vectors()
    get_catalog().create_repo("anew", "/nonexistent", None, None)
    a, b = np.eye(3, dtype=np.float32)[0], np.eye(3, dtype=np.float32)[1]
    store.upsert("anew", ["old"], [a], [{"file": "a.py"}])
    assert [i for i, _ in store.query("anew", a, 5)] == ["old"]  # the handle is kept
    other = VectorStore(store.client, store._registration)  # another service's writer
    other.drop("anew")
    assert store.query("anew", a, 5) == []
    other.upsert("anew", ["new"], [b], [{"file": "b.py"}])
    assert [i for i, _ in store.query("anew", b, 5)] == ["new"]
    other.drop("anew")  # and made anew before this process asks again
    other.upsert("anew", ["newer"], [a], [{"file": "c.py"}])
    assert [i for i, _ in store.query("anew", a, 5)] == ["newer"]
