"""The learned ranker: its fitting logic, the shipped model, and that it really reorders real
search results (a ranker that changes nothing fails here)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from coderag.fitted import FittedModelError
from coderag.settings import get_settings
from coderag_retriever import learned
from coderag_retriever.search import gather, rank
from coderag_training import ranker
from coderag_training.pins import load_corpora, load_written
from tests.conftest import indexed

SOURCES = {
    "billing/invoice.py": (
        "def invoice_total(lines, tax_rate):\n"
        '    """Sum the invoice lines and add tax."""\n'
        "    subtotal = sum(l.price * l.qty for l in lines)\n"
        "    return round(subtotal * (1 + tax_rate), 2)\n\n\n"
        "def format_invoice(invoice):\n"
        "    return f'{invoice.number}: {invoice_total(invoice.lines, invoice.tax)}'\n"
    ),
    "shipping/rates.py": (
        "def shipping_cost(weight_kg, zone):\n"
        '    """Price a parcel by weight and destination zone."""\n'
        "    base = {1: 4.0, 2: 7.5, 3: 12.0}[zone]\n"
        "    return base + 0.8 * weight_kg\n"
    ),
    "tests/test_invoice.py": (
        "from billing.invoice import invoice_total\n\n\n"
        "def test_invoice_total_adds_tax():\n"
        "    assert invoice_total([], 0.2) == 0\n"
    ),
    "README.md": "# Shop\n\nInvoices, shipping rates and their tests.\n",
}


def test_fit_learns_the_signal_and_round_trips() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, len(learned.FEATURES)))
    y = (x[:, 0] + 0.5 * x[:, 3] > 0.8).astype(float)
    model = ranker.fit(x, y, l2=1.0)
    p = model.probability(x)
    assert p[y == 1].mean() > 0.7 > 0.3 > p[y == 0].mean()
    assert model.weights[0] > 0 and model.weights[3] > 0
    again = learned.parse(model.to_json({"split": "tune"}))
    assert np.allclose(again.probability(x), p, atol=1e-4)
    with pytest.raises(FittedModelError, match="refit"):
        learned.parse(json.dumps({**json.loads(model.to_json({})), "features": ["x"]}))


def test_shipped_ranker_loads_with_provenance() -> None:
    text = (Path(learned.__file__).parent / "ranker.json").read_text("utf-8")
    trained_on = json.loads(text)["trained_on"]
    splits = set(trained_on["split"].split("+"))
    assert splits and splits <= {"tune", "tune2", "wtrain"}  # never a test split
    frozen = {c["name"] for c in load_corpora() if c["split"] in ("test", "test2")}
    frozen |= {c["name"] for c in load_written() if c.get("split") == "wtest"}
    assert trained_on["questions"] and not frozen & set(trained_on["questions"])
    assert len(learned.load().weights) == len(learned.FEATURES)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[TestClient]:
    with indexed(tmp_path / "shop", "shop", SOURCES) as client:
        yield client


def _ranker_file(tmp_path: Path, weights: dict[str, float]) -> str:
    n = len(learned.FEATURES)
    model = learned.Ranker(
        np.zeros(n),
        np.ones(n),
        np.array([weights.get(f, 0.0) for f in learned.FEATURES]),
        0.0,
    )
    path = tmp_path / "ranker.json"
    path.write_text(model.to_json({"split": "tune"}))
    return str(path)


def test_search_orders_by_the_learned_ranker(
    shop: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    query = "how is the tax added to an invoice total"
    body = shop.post("/search", json={"query": query, "repo": "shop", "top_k": 5}).json()
    assert body["results"][0]["symbol"] == "invoice_total"
    assert all(0.0 <= h["confidence"] <= 1.0 for h in body["results"])
    confidences = [h["confidence"] for h in body["results"]]
    assert confidences == sorted(confidences, reverse=True)

    settings = get_settings()
    fused = [
        r.unit.symbol
        for r in rank("shop", query, 5, settings.model_copy(update={"ranker": "fused"}))
    ]
    assert all(
        r.confidence is None
        for r in rank("shop", query, 5, settings.model_copy(update={"ranker": "fused"}))
    )
    # A ranker that prefers test code over everything must put the test first: the order comes
    # from the model, not from the fusion.
    contrary = settings.model_copy(
        update={"ranker_path": _ranker_file(tmp_path, {"test_unasked": 5.0})}
    )
    ordered = [r.unit.symbol for r in rank("shop", query, 5, contrary)]
    assert ordered[0] == "test_invoice_total_adds_tax" != fused[0]


def test_features_see_the_call_graph(shop: TestClient) -> None:
    pool = gather("shop", "how is an invoice formatted", get_settings())
    assert pool is not None
    positions, x = learned.features(
        pool.query, pool.index, pool.rankings, pool.candidates(), pool.flow
    )
    assert x.shape == (len(positions), len(learned.FEATURES))
    col = learned.FEATURES.index("adjacent_seeds")
    symbols = [pool.index.units[p].symbol for p in positions]
    # format_invoice calls invoice_total: each is adjacent to the other, shipping_cost to neither
    assert x[symbols.index("invoice_total"), col] > 0
    if "shipping_cost" in symbols:
        assert x[symbols.index("shipping_cost"), col] == 0


def test_tests_rank_down_for_where_and_up_for_what_should(shop: TestClient) -> None:
    def hits(query: str) -> dict[str, tuple[int, float]]:
        body = shop.post("/search", json={"query": query, "repo": "shop", "top_k": 10}).json()
        return {h["symbol"]: (i, h["confidence"]) for i, h in enumerate(body["results"])}

    where = hits("where is the invoice total with tax implemented")
    should = hits("what should the invoice total be for an empty invoice, per the tests")
    test = "test_invoice_total_adds_tax"
    assert where["invoice_total"][0] == 0 and where[test][0] > 0
    # Asked about expected behaviour, the test is judged likelier to answer than when asked where
    # the code is (R9): tests are ranked down only for questions that are not about them.
    assert should[test][1] > 2 * where[test][1]


def test_feedback_route_reaches_code_through_the_encoders_best_names(shop: TestClient) -> None:
    no_vocab = get_settings().model_copy(update={"zh_vocab": False, "zh_dictionary": False})
    pool = gather("shop", "运费是怎么按重量计算的？", no_vocab)
    assert pool is not None and pool.query.tokens == []
    seed = pool.rankings["vector2"][0][0]
    feedback = [p for p, _ in pool.rankings["feedback"]]
    # Without the vocabulary and dictionary the question has no code token: feedback hits come
    # from the seeds.
    assert seed in feedback[:3]
    assert pool.routes[feedback[0]].get("feedback") == 1
