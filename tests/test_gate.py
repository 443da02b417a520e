"""The rules decided once (issues 11 and 31): the score gate that /search reports and /ask
refuses by, and the test for Chinese that picks an answer's language (pure logic; the real paths
are tests/test_refusal.py and tests/test_one_path.py)."""

from __future__ import annotations

from coderag.gate import below_gate, best_similarity, names_code
from coderag.language import STOP_EN, han_count, has_han, language
from coderag.schemas import Hit
from coderag.settings import Settings
from coderag_generator import refusal
from coderag_retriever import relevance
from tests.hits import make_hit


def hit(similarity: float | None, *routes: str) -> Hit:
    return make_hit(
        similarity=similarity,
        routes={r: 1 for r in routes or ("keyword",)},
        symbol="save_order",
        file="orders.py",
        text="def save_order(order): ...",
    )


def test_the_gate_holds_back_weak_hits_unless_an_identifier_is_named() -> None:
    weak = [hit(0.5), hit(None), hit(0.7)]
    assert best_similarity(weak) == 0.7 and below_gate(weak, 0.8)
    assert not below_gate(weak, 0.7), "at the gate passes"
    assert not below_gate(weak, 0.0), "0 turns the gate off"
    assert not below_gate([], 0.8), "no hits is its own answer, not the gate's"
    named = [*weak, hit(0.1, "exact", "symbol")]
    assert names_code(named) and not below_gate(named, 0.99)


def test_the_retriever_decides_by_the_same_gate_without_the_learned_rule() -> None:
    """With the cosine rule, the retriever's verdict is the gate's on the first ten hits; the
    generator refuses on that verdict alone, after the named-term check."""
    for hits, gate in (([hit(0.5)], 0.8), ([hit(0.9)], 0.8), ([hit(0.1, "exact")], 0.8)):
        settings = Settings(refusal_rule="gate", score_gate=gate)
        verdict = relevance.verdict("how are orders stored", hits, settings).below
        assert verdict == below_gate(hits, gate), (hits, gate)
        refused = refusal.gate("how are orders stored", hits, "en", verdict)
        assert (refused is not None) == verdict
    late = [hit(0.5)] * relevance.JUDGED + [hit(0.99)]
    assert relevance.verdict("q", late, Settings(refusal_rule="gate", score_gate=0.8)).below


def test_chinese_is_told_by_han_characters() -> None:
    assert language("订单是怎么创建的？") == "zh" and language("How is an order created?") == "en"
    assert language("where is 超时 set") == "zh" and has_han("㐀") and not has_han("ｶﾀｶﾅ")
    assert han_count("订单 order 创建") == 4
    assert {"the", "where", "me"} <= STOP_EN and "order" not in STOP_EN
