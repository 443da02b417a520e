"""The shipped code cross-encoder (issue 31): its files match its card, it loads from the packages
alone, it reads a unit's body, the trainer that made it can learn, and search uses it."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from coderag.embedding import reader_text
from coderag.settings import get_settings
from coderag_embedder import rerank
from coderag_training import reranker as rr

pytestmark = pytest.mark.slow


def test_the_shipped_layers_are_what_the_card_says() -> None:
    layers = rerank.PACKAGE_DIR / "reranker.safetensors"
    card = rerank.card()
    assert card, "the shipped cross-encoder has no model card"
    assert hashlib.sha256(layers.read_bytes()).hexdigest() == card["sha256"]
    assert layers.stat().st_size < 40 * 2**20
    for fact in ("base", "questions", "steps", "seconds", "loss", "tune2", "max_tokens", "layers"):
        assert fact in card, fact
    assert get_settings().rerank_model == rerank.PACKAGED


def _unit(symbol: str, text: str, file: str = "dates.py") -> str:
    return reader_text(file, "function", symbol, "", text)


SIBLINGS = {
    "parse_date": "def parse_date(s):\n    year, month, day = s.split('-')\n"
    "    return Date(int(year), int(month), int(day))\n",
    "format_date": "def format_date(d):\n    return f'{d.year:04d}-{d.month:02d}-{d.day:02d}'\n",
    "load_dates": "def load_dates(path):\n    with open(path) as f:\n"
    "        return [parse_date(line.strip()) for line in f]\n",
}


def test_the_shipped_model_reads_what_a_body_does() -> None:
    reader = rerank.packaged()
    texts = [_unit(name, code) for name, code in SIBLINGS.items()]
    cases = {
        "split a year-month-day string into a date": "parse_date",
        "turn a date into a zero-padded string": "format_date",
        "read every date from a file, one per line": "load_dates",
    }
    for question, gold in cases.items():
        scores = reader.scores(question, texts)
        best = max(zip(scores, SIBLINGS, strict=True))[1]
        assert best == gold, (question, dict(zip(SIBLINGS, scores, strict=True)))


def test_the_trainer_overfits_a_few_groups() -> None:
    """A trainer that cannot drive a handful of fixed groups to a low loss is broken."""
    names = list(SIBLINGS)
    questions = []
    for i, (question, gold) in enumerate(
        {
            "split a string into a date": "parse_date",
            "date to text": "format_date",
            "dates from a file": "load_dates",
        }.items()
    ):
        cands = [
            {
                "file": "dates.py",
                "kind": "function",
                "symbol": n,
                "text": SIBLINGS[n],
                "doc": "",
                "label": int(n == gold),
                "rank": k + 1,
            }
            for k, n in enumerate(names)
        ]
        questions.append(
            rr.Question(str(i), "c", "tune", "en", "lookup", question, question, cands, [], [])
        )
    reader = rerank.fresh(max_tokens=64, layers=1)
    for name, p in reader.model.named_parameters():
        p.requires_grad_(not name.startswith("bert.embeddings."))
    log = rr.train(
        reader,
        questions,
        rr.Run(steps=40, lr=3e-4, head_lr=3e-3, groups_per_step=3, log_every=10, threads=1),
    )
    losses = [r["loss"] for r in log.rows if "loss" in r]
    assert losses[-1] < 0.2 * losses[0], losses
    ranked = [rr.first_gold(rr.rerank(reader, q, 3, 0.0)) for q in questions]
    assert ranked == [1, 1, 1]


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
    assert (
        rr.group(rr.Question("q", "c", "t", "en", "l", "q", "q", randoms, [], []), 1, rng) is None
    )


def test_search_reorders_its_first_hits_with_the_shipped_model(tmp_path: Path) -> None:
    from coderag_retriever.search import rank
    from tests.conftest import indexed

    q = "split a year-month-day string into a date"
    sources = {"dates.py": "\n\n".join(SIBLINGS.values())}
    with indexed(tmp_path / "dates", "dates", sources) as client:
        r = client.post("/search", json={"query": q, "repo": "dates", "top_k": 3})
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["symbol"] == "parse_date"
        on = get_settings().model_copy(update={"rerank_model": "coderag", "rerank_top": 3})
        off = on.model_copy(update={"rerank_model": ""})
        hits_on = rank("dates", q, 3, on)
        hits_off = rank("dates", q, 3, off)
        assert {h.unit.symbol for h in hits_on} == {h.unit.symbol for h in hits_off}
        assert hits_on[0].unit.symbol == "parse_date"
    assert json.dumps(rerank.card())  # the card is plain JSON
