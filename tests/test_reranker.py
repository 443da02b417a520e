"""The code cross-encoder of issue 31: the trainer can learn (a few fixed groups driven to a low
loss), a run's export loads on the packaged MiniLM as the embedder serves it, and search reorders
its first hits with it, in process and through /search."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from coderag.embedding import reader_text
from coderag.settings import get_settings
from coderag_embedder import rerank
from coderag_training import reranker as rr

pytestmark = pytest.mark.slow

SIBLINGS = {
    "parse_date": "def parse_date(s):\n    year, month, day = s.split('-')\n"
    "    return Date(int(year), int(month), int(day))\n",
    "format_date": "def format_date(d):\n    return f'{d.year:04d}-{d.month:02d}-{d.day:02d}'\n",
    "load_dates": "def load_dates(path):\n    with open(path) as f:\n"
    "        return [parse_date(line.strip()) for line in f]\n",
}
"""A function, its inverse and its caller: the units that win where only the body tells."""

QUESTIONS = {
    "split a string into a date": "parse_date",
    "date to text": "format_date",
    "dates from a file": "load_dates",
}


def _questions() -> list[rr.Question]:
    out = []
    for i, (question, gold) in enumerate(QUESTIONS.items()):
        cands = [
            {
                "file": "dates.py",
                "kind": "function",
                "symbol": n,
                "text": SIBLINGS[n],
                "doc": "",
                "label": int(n == gold),
                "rank": k + 1,
                "confidence": 0.5,
            }
            for k, n in enumerate(SIBLINGS)
        ]
        out.append(
            rr.Question(str(i), "c", "tune", "en", "lookup", question, question, cands, [], [])
        )
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-layer cross-encoder overfitted on three fixed groups and exported as a run is."""
    torch.manual_seed(0)  # the new head's initial weights: the same run every time
    reader = rerank.fresh(max_tokens=64, layers=2)
    for name, p in reader.model.named_parameters():
        p.requires_grad_(not name.startswith("bert.embeddings."))
    questions = _questions()
    log = rr.train(
        reader,
        questions,
        rr.Run(steps=40, lr=5e-4, head_lr=5e-3, groups_per_step=3, log_every=10, threads=1),
    )
    losses = [r["loss"] for r in log.rows if "loss" in r]
    assert losses[-1] < 0.2 * losses[0], f"the trainer did not learn: {losses}"
    assert [rr.first_gold(rr.rerank(reader, q, 3, 0.0)) for q in questions] == [1, 1, 1]
    out = tmp_path_factory.mktemp("run")
    rr.export(reader, out, {"max_tokens": 64, "layers": 2, "steps": 40})
    return out


def test_an_export_loads_on_the_packaged_minilm_as_served(trained: Path) -> None:
    card = json.loads((trained / "reranker.json").read_text())
    assert card["layers"] == 2
    served = rerank.packaged(trained / "reranker.safetensors")  # int8, as the embedder runs it
    texts = [reader_text("dates.py", "function", n, "", t) for n, t in SIBLINGS.items()]
    for question, gold in QUESTIONS.items():
        scores = served.scores(question, texts)
        assert max(zip(scores, SIBLINGS, strict=True))[1] == gold, (question, scores)
    # the embedder's entry point reads a run's directory the same way
    assert rerank.score(str(trained), "date to text", texts) == pytest.approx(
        served.scores("date to text", texts), abs=1e-4
    )


def test_an_export_that_does_not_fit_is_a_config_error(trained: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    from coderag.errors import ConfigError

    state = load_file(str(trained / "reranker.safetensors"))
    state["head.extra"] = state["head.bias"].clone()
    save_file(state, str(tmp_path / "reranker.safetensors"))
    (tmp_path / "reranker.json").write_text(json.dumps({"max_tokens": 64, "layers": 2}))
    with pytest.raises(ConfigError, match="does not fit"):
        rerank.packaged(tmp_path / "reranker.safetensors")
    with pytest.raises(ConfigError, match="missing"):
        rerank.packaged(tmp_path / "absent.safetensors")


def test_groups_hold_the_gold_unit_first_and_only_wrong_ones_after() -> None:
    cands = [{"label": int(i == 3), "rank": i + 1, "symbol": f"c{i}"} for i in range(20)]
    randoms = [{"label": 0, "symbol": f"r{i}"} for i in range(20)]
    q = rr.Question("q", "c", "tune", "en", "lookup", "q", "q", cands, randoms, [])
    rng = random.Random(0)
    easy = rr.group(q, 0.0, rng)
    hard = rr.group(q, 1.0, rng)
    assert easy and hard
    for g in (easy, hard):
        assert len(g) == rr.GROUP and g[0]["label"] == 1
        assert not any(c["label"] for c in g[1:])
    assert all(c["symbol"].startswith("r") for c in easy[1:])
    assert all(c["symbol"].startswith("c") for c in hard[1:])
    no_gold = rr.Question("q", "c", "t", "en", "l", "q", "q", randoms, [], [])
    assert rr.group(no_gold, 1.0, rng) is None


def test_search_reorders_its_first_hits_with_a_trained_model(
    trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coderag_retriever.search import rank
    from tests.conftest import indexed

    monkeypatch.setenv("CODERAG_RERANK_MODEL", str(trained))
    monkeypatch.setenv("CODERAG_RERANK_TOP", "3")
    monkeypatch.setenv("CODERAG_RERANK_WEIGHT", "0")
    get_settings.cache_clear()
    sources = {"dates.py": "\n\n".join(SIBLINGS.values())}
    served = rerank.packaged(trained / "reranker.safetensors")
    try:
        with indexed(tmp_path / "dates", "dates", sources) as client:
            off = get_settings().model_copy(update={"rerank_model": ""})
            for question, gold in QUESTIONS.items():
                r = client.post("/search", json={"query": question, "repo": "dates", "top_k": 3})
                assert r.status_code == 200, r.text
                assert r.json()["results"][0]["symbol"] == gold, (question, r.json())
                on = rank("dates", question, 3, get_settings())
                plain = rank("dates", question, 3, off)
                assert {h.unit.symbol for h in on} == {h.unit.symbol for h in plain}
                # the order is the cross-encoder's own over the ranker's first three
                texts = [
                    reader_text(h.unit.file, h.unit.kind, h.unit.symbol, h.unit.doc, h.unit.text)
                    for h in plain
                ]
                scores = served.scores(question, texts)
                own = [
                    h.unit.symbol
                    for _, h in sorted(zip(scores, plain, strict=True), key=lambda t: -t[0])
                ]
                assert [h.unit.symbol for h in on] == own
                assert on[0].unit.symbol == gold
    finally:
        get_settings.cache_clear()
