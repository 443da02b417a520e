"""Retriever routes and stages beyond the basic three: cluster, history, vote fusion, call-graph
expansion, MMR and a cross-encoder rerank — on real repositories, vectors and git history."""

from __future__ import annotations

import time
from pathlib import Path

import git
import numpy as np
import pytest

from coderag.embedding import reader_text
from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.schemas import Unit
from coderag.settings import Settings, get_settings
from coderag.store import get_catalog, get_vectors
from coderag_retriever.expand import expand, is_flow_question
from coderag_retriever.fuse import mmr, vote
from coderag_retriever.index import assemble, bm25_scores, get_index_cache
from coderag_retriever.postings import Postings
from coderag_retriever.search import rank
from coderag_retriever.shards import FileShard, drop_shard, make_shard
from tests.conftest import commit_all, indexed
from tests.tinymodels import build_tiny_roberta

CHAIN = {
    "api.py": (
        "from client import send\n\n\n"
        'def get(url):\n    """Fetch a URL."""\n    return request(\'GET\', url)\n\n\n'
        "def request(method, url):\n    return send(method, url)\n"
    ),
    "client.py": (
        "from wire import write_bytes\n\n\n"
        "def send(method, url):\n    payload = method + ' ' + url\n"
        "    return write_bytes(payload)\n"
    ),
    "wire.py": "def write_bytes(payload):\n    return len(payload.encode())\n",
    "colors.py": (
        "def paint(color):\n    return color.upper()\n\n\ndef blend(a, b):\n    return a + b\n"
    ),
}


def _index(
    root: Path,
    files: dict[str, str],
    name: str,
    settings_env: dict | None = None,
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if monkeypatch and settings_env:
        for k, v in settings_env.items():
            monkeypatch.setenv(k, v)
        get_settings.cache_clear()
    get_catalog().create_repo(name, str(root), None, None)
    run_now(IndexRepo(repo=name))


def test_vote_and_mmr_logic() -> None:
    fused = vote(
        {"symbol": [(1, 4.0), (2, 2.0)], "vector": [(2, 0.9), (3, 0.45)]},
        {"symbol": 0.4, "vector": 0.35},
    )
    assert fused[0][0] == 2 and fused[0][1] == pytest.approx((0.2 + 0.35) / 0.75)
    assert fused[1][0] == 1 and fused[1][1] == pytest.approx(0.4 / 0.75)
    vecs = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    assert mmr([0, 1, 2], {0: 1.0, 1: 0.99, 2: 0.8}, vecs, 0.5, 2) == [0, 2]
    assert mmr([0, 1, 2], {0: 1.0, 1: 0.99, 2: 0.8}, vecs, 1.0, 2) == [0, 1]


def test_flow_questions_are_recognised() -> None:
    assert is_flow_question("how does a get call end up sending bytes?")
    assert is_flow_question("从 get 到写出字节的调用链是怎样的？")
    assert not is_flow_question("where is the color blended?")


class _Edges:
    """A call graph given as adjacency, for the pure scoring logic of expand()."""

    def __init__(self, edges: dict[str, list[str]]) -> None:
        self.edges = edges

    def neighbourhood(self, repo: str, ids: list[str], depth: int) -> dict[str, int]:
        seen = {u: 0 for u in ids}
        frontier = list(ids)
        for d in range(1, depth + 1):
            frontier = [v for u in frontier for v in self.edges.get(u, []) if v not in seen]
            seen.update({v: d for v in frontier if v not in seen})
        return seen


def test_expansion_lifts_neighbours_but_never_above_the_first_hit() -> None:
    graph = _Edges({"top": ["far"], "second": ["near", "top"], "near": ["deep"]})
    scored = {"top": 1.0, "second": 0.9, "a": 0.8, "b": 0.7, "stranger": 0.5, "near": 0.2}
    out = expand(graph, "r", scored, depth=1)  # type: ignore[arg-type]
    assert max(out, key=out.__getitem__) == "top" and out["top"] == 1.0
    assert out["near"] > out["stranger"] > scored["near"]
    assert 0 < out["far"] < 1.0 and "deep" not in out
    assert "deep" in expand(graph, "r", scored, depth=2)  # type: ignore[arg-type]
    assert expand(graph, "r", scored, depth=0) == scored


def test_flow_questions_pull_in_the_whole_chain(tmp_path: Path) -> None:
    _index(tmp_path, CHAIN, "chain")
    s = get_settings()
    question = "how does get end up in write_bytes?"
    chain = {"get", "request", "send", "write_bytes"}
    top = [r.unit.symbol for r in rank("chain", question, 5, s)]
    assert chain <= set(top)
    # the fusion alone, without the call graph, misses a link (the learned ranker reads the
    # graph through its adjacency features too, so it is compared with the fused order)
    plain = rank("chain", question, 5, s.model_copy(update={"expand_depth": 0, "ranker": "fused"}))
    assert not chain <= {r.unit.symbol for r in plain}
    graph_only = [r for r in rank("chain", question, 5, s) if r.routes == {"graph": 1}]
    assert all(r.unit.symbol in chain for r in graph_only)


def test_history_route_prefers_recently_changed_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "h"
    files = {
        "a.py": "def parse_config(text):\n    return text\n",
        "b.py": "def parse_config_file(path):\n    return path\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    repo = git.Repo.init(root)
    commit_all(repo, "one")
    for i in range(3):
        (root / "b.py").write_text(files["b.py"] + f"# rev {i}\n")
        commit_all(repo, f"edit {i}")
    get_catalog().create_repo("h", str(root), None, None)
    run_now(IndexRepo(repo="h"))
    assert get_catalog().history("h") == {"a.py": 1, "b.py": 4}
    only_history = Settings(route_weights="keyword:1,history:5", fusion="vote")
    ranked = rank("h", "parse config", 2, only_history)
    assert ranked[0].unit.file == "b.py" and "history" in ranked[0].routes


def test_cluster_route_on_real_vectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    many = {f"m{i}.py": CHAIN[k] for i, k in enumerate(list(CHAIN) * 4)}
    _index(
        tmp_path,
        many,
        "cl",
        {"CODERAG_ROUTE_WEIGHTS": "vector:1,cluster:1", "CODERAG_CLUSTER_MIN_SIZE": "3"},
        monkeypatch,
    )
    row = get_catalog().db.read("SELECT silhouette FROM repos WHERE name='cl'")[0]
    labels = get_catalog().db.read("SELECT label FROM clusters WHERE repo='cl'")
    assert len(labels) == get_catalog().get_repo("cl").units
    assert row["silhouette"] is not None and max(r["label"] for r in labels) >= 1
    ranked = rank("cl", "blend two colors", 3, get_settings())
    assert ranked[0].unit.symbol in ("blend", "paint") and "cluster" in ranked[0].routes


def test_cross_encoder_rerank_from_a_local_directory(tmp_path: Path) -> None:
    import torch
    from transformers import AutoTokenizer, RobertaConfig, RobertaForSequenceClassification

    model = build_tiny_roberta(tmp_path / "ce")
    config = RobertaConfig.from_pretrained(model, num_labels=1)
    torch.manual_seed(0)
    RobertaForSequenceClassification(config).save_pretrained(model)
    _index(tmp_path / "repo", CHAIN, "rr")
    top = 6
    s = get_settings().model_copy(
        update={"rerank_model": str(model), "rerank_top": top, "rerank_weight": 0.0}
    )
    query = "send a request"
    ranked = rank("rr", query, 50, s)
    plain = rank("rr", query, 50, get_settings().model_copy(update={"rerank_model": ""}))
    assert {r.unit.id for r in ranked} == {r.unit.id for r in plain}
    # The first `top` are in the cross-encoder's own order, scored here independently of the
    # retriever over what it reads of each unit; the rest keep the learned ranker's order.
    tok = AutoTokenizer.from_pretrained(model)
    ce = RobertaForSequenceClassification.from_pretrained(model).eval()
    head = plain[:top]
    with torch.inference_mode():
        batch = tok(
            [query] * len(head),
            [
                reader_text(r.unit.file, r.unit.kind, r.unit.symbol, r.unit.doc, r.unit.text)
                for r in head
            ],
            padding=True,
            truncation=True,
            max_length=512,
            return_tensors="pt",
        )
        logits = ce(**batch).logits[:, 0].tolist()
    expected = [r.unit.id for _, r in sorted(zip(logits, head, strict=True), key=lambda t: -t[0])]
    expected += [r.unit.id for r in plain[top:]]
    assert [r.unit.id for r in ranked] == expected
    assert expected != [r.unit.id for r in plain], "a reranker that changes nothing fails"


def test_reclusters_when_the_silhouette_falls_below_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coderag_retriever.clustering import refresh

    many = {f"m{i}.py": CHAIN[k] for i, k in enumerate(list(CHAIN) * 4)}
    _index(tmp_path, many, "rc", {"CODERAG_CLUSTER_MIN_SIZE": "3"}, monkeypatch)
    catalog = get_catalog()

    def scramble() -> list[int]:
        ids = [
            r["unit_id"]
            for r in catalog.db.read(
                "SELECT unit_id FROM clusters WHERE repo='rc' ORDER BY unit_id"
            )
        ]
        bad = [i % 2 for i in range(len(ids))]
        catalog.db.write(
            lambda c: c.executemany(
                "UPDATE clusters SET label=:label WHERE repo='rc' AND unit_id=:id",
                [{"label": b, "id": i} for b, i in zip(bad, ids, strict=True)],
            )
        )
        return bad

    def labels() -> list[int]:
        return [
            r["label"]
            for r in catalog.db.read("SELECT label FROM clusters WHERE repo='rc' ORDER BY unit_id")
        ]

    # Alternating labels over real vectors score far under 0.3: the floor forces a re-cluster.
    bad = scramble()
    score = refresh(catalog, "rc", get_settings())
    assert labels() != bad and score is not None and score >= 0.3
    # With the floor below any silhouette, the same bad clustering is kept.
    bad = scramble()
    refresh(catalog, "rc", get_settings().model_copy(update={"silhouette_floor": -1.0}))
    assert labels() == bad


def test_a_changed_file_reuses_the_tokens_of_its_unchanged_units() -> None:
    def unit(start: int, text: str) -> Unit:
        return Unit(
            repo="r",
            file="a.py",
            start_line=start,
            end_line=start + 1,
            symbol=f"f{start}",
            kind="function",
            language="python",
            text=text,
        )

    postings = Postings()
    old = make_shard("1", [unit(1, "def f(): return redirect()"), unit(5, "pass")], {}, postings)
    poisoned = FileShard(
        old.sha, old.units, (["poisoned"], ["poisoned"]), old.slots, old.symbols, old.names
    )
    drop_shard(poisoned, postings)
    new = make_shard(
        "2",
        [unit(1, "def f(): return redirect()"), unit(5, "return timeout")],
        {},
        postings,
        poisoned,
    )
    index = assemble({"a.py": new}, postings, 2, ["a.py"])
    assert bm25_scores(index, ["poisoned"], 5) != [], "an unchanged unit reuses its tokens"
    assert [p for p, _ in bm25_scores(index, ["timeout"], 5)] == [1], "a changed one is re-read"
    assert postings.live == 2 and postings.dead == 2


def test_second_encoder_feeds_the_vector2_route(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "cache.py": 'def evict_oldest(entries):\n    """Drop the least recently used entry."""\n'
        "    return entries[1:]\n",
        "colors.py": CHAIN["colors.py"],
    }
    _index(tmp_path, files, "two")
    only_second = get_settings().model_copy(update={"route_weights": "vector2:1"})
    top = rank("two", "缓存满了以后删除最旧的条目", 2, only_second)
    assert top[0].unit.symbol == "evict_oldest" and top[0].routes == {"vector2": 1}
    assert get_vectors().count("two", "vector2") == get_catalog().get_repo("two").units

    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()
    run_now(IndexRepo(repo="two"))
    assert get_vectors().count("two", "vector2") == 0, "a switched-off encoder leaves no vectors"
    assert (
        rank(
            "two",
            "evict oldest",
            2,
            get_settings().model_copy(update={"route_weights": "vector2:1"}),
        )
        == []
    )


def test_a_restarted_server_builds_its_indexes_before_the_first_question(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from coderag_app.server import create_app

    with indexed(tmp_path / "warm", "warm", CHAIN):
        pass
    cache = get_index_cache()
    cache.forget("warm")  # what a new process starts with
    with TestClient(create_app()):
        for _ in range(600):
            if cache.holds("warm"):
                break
            time.sleep(0.1)
        assert cache.holds("warm"), "no index was built at startup"
