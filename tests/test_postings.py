"""The retriever's index is updated file by file: after real git commits the updated index equals
a full rebuild of the same catalog (positions, symbol and name maps, BM25 scores, the whole search
ranking), reading only the changed files; and its BM25 scores are those of bm25s over the same
documents."""

from __future__ import annotations

import shutil
from pathlib import Path

import bm25s
import git
import numpy as np
import pytest

from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_retriever.index import RepoIndex, bm25_scores, build, get_index_cache
from coderag_retriever.query import Query
from coderag_retriever.search import rank
from tests.conftest import commit_all

RETRIEVER = Path(__file__).resolve().parents[1] / "services" / "retriever" / "coderag_retriever"

QUERIES = [
    "how are the routes fused",
    "reciprocal rank fusion constant",
    "bm25 scores of a query",
    "where is the order total computed",
    "which function reads the symbol table",
    "cluster labels of the units",
    "怎么计算订单总额",
    "expand over the call graph",
    "refund_order",
]
"""Questions compared between the updated index and a full rebuild."""


@pytest.fixture(autouse=True)
def one_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index under test holds no vectors; one encoder keeps the chain short."""
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()


@pytest.fixture
def project(sample_repo: Path) -> Path:
    """The sample repository plus the retriever's own sources: real code, about 35 files."""
    shutil.copytree(RETRIEVER, sample_repo / "retriever", ignore=shutil.ignore_patterns("*.pyc"))
    commit_all(git.Repo(sample_repo), "add the retriever")
    return sample_repo


def same_index(repo: str) -> list[str]:
    """Assert the cached (updated) index equals a full rebuild; returns the files it read."""
    cat = get_catalog()
    updated = get_index_cache().get(cat, repo)
    full = build(cat, repo, updated.generation)
    assert updated.ids == full.ids
    assert updated.symbol_tokens == full.symbol_tokens
    assert updated.by_symbol_token == full.by_symbol_token
    assert updated.by_name == full.by_name
    for q in QUERIES:
        tokens = Query(repo, q).tokens
        assert bm25_scores(updated, tokens, 50) == bm25_scores(full, tokens, 50), q
    settings = get_settings()
    incremental = {q: [(r.unit.id, r.score) for r in rank(repo, q, 10, settings)] for q in QUERIES}
    get_index_cache().forget(repo)
    rebuilt = {q: [(r.unit.id, r.score) for r in rank(repo, q, 10, settings)] for q in QUERIES}
    assert incremental == rebuilt
    assert len(get_index_cache().get(cat, repo).read) == len(full.files), "forget rebuilds"
    return updated.read


@pytest.mark.slow
def test_one_file_commits_update_the_index_like_a_full_rebuild(project: Path) -> None:
    cat = get_catalog()
    cat.create_repo("inc", str(project), None, None)
    run_now(IndexRepo(repo="inc"))
    first = get_index_cache().get(cat, "inc")
    assert len(first.read) == len(first.files) > 30, "the first generation is read whole"
    repo = git.Repo(project)

    # 1. one file edited: a function added, another changed
    fuse = project / "retriever" / "fuse.py"
    fuse.write_text(
        fuse.read_text().replace(
            "def rrf(", "def rrf_constant_checked(k):\n    return k\n\n\ndef rrf("
        )
    )
    commit_all(repo, "one file")
    run_now(IndexRepo(repo="inc"))
    assert same_index("inc") == ["retriever/fuse.py"], "only the committed file is read"
    assert any(u.symbol == "rrf_constant_checked" for u in get_index_cache().get(cat, "inc").units)

    # 2. a file added, one deleted, one renamed
    (project / "src" / "python" / "refunds.py").write_text(
        "def refund_order(order):\n    return order.total\n"
    )
    repo.index.remove(["retriever/rewrite.py"], working_tree=True)
    repo.git.mv("retriever/expand.py", "retriever/graph_walk.py")
    commit_all(repo, "add, delete, rename")
    run_now(IndexRepo(repo="inc"))
    assert same_index("inc") == ["retriever/graph_walk.py", "src/python/refunds.py"]
    index = get_index_cache().get(cat, "inc")
    assert not any(u.file == "retriever/rewrite.py" for u in index.units)
    assert index.postings.live == len(index), "deleted documents left the postings"
    hits = bm25_scores(index, ["refund"], 1)
    assert index.units[hits[0][0]].symbol == "refund_order"
    match_bm25s(index)


def match_bm25s(index: RepoIndex) -> None:
    """The updated postings score every unit as bm25s does over the same documents."""
    docs = [d for path in sorted(index.files) for d in index.files[path].documents]
    reference = bm25s.BM25()
    reference.index([d or ["\u2205"] for d in docs], show_progress=False)
    compared = 0
    for q in QUERIES:
        tokens = [t for t in Query("inc", q).tokens if t in reference.vocab_dict]
        if not tokens:  # bm25s cannot score a query with no known token
            continue
        compared += 1
        ours = index.postings.scores(tokens)[index.slot_of]
        assert np.allclose(ours, reference.get_scores(tokens), rtol=1e-4, atol=1e-5), q
    assert compared >= len(QUERIES) - 1
