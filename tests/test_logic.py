"""Pure logic: tokens, fusion, the citation check, context budget, settings."""

from __future__ import annotations

import pytest

from coderag.settings import Settings
from coderag_generator.backends.extractive import quoted
from coderag_generator.citations import INVALID_MARK, check
from coderag_generator.context import Snippet, assemble
from coderag_retriever.fuse import rrf
from coderag_retriever.text import code_tokens, query_tokens, split_identifier, stem


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


def test_extractive_quotes_the_best_unit_and_its_call_links() -> None:
    hits = [
        {"symbol": "send", "calls": ["build"]},
        {"symbol": "unrelated", "calls": []},
        {"symbol": "build", "calls": ["encode"]},
        {"symbol": "caller", "calls": ["send"]},
    ]
    assert [h["symbol"] for h in quoted(hits)] == ["send", "build"]
    assert [h["symbol"] for h in quoted([hits[0], hits[3], hits[2]])] == ["send", "caller", "build"]
    assert [h["symbol"] for h in quoted(hits[1:2])] == ["unrelated"]
    assert quoted([]) == []


def test_score_gate_defaults_follow_the_encoder_it_reads() -> None:
    assert Settings().gate() == 0.86  # the packaged multilingual-e5-small second encoder
    assert Settings(embed_model_2="").gate() == 0.39  # MiniLM alone
    assert Settings(embed_model_2="/models/mine").gate() == 0.0  # uncalibrated: off
    assert Settings(score_gate=0.5).gate() == 0.5 and Settings(score_gate=0).gate() == 0.0
    # the gate follows the route that runs: MiniLM's cosines when vector2 is weighted out
    assert Settings(route_weights="vector:1,vector2:0,keyword:1").gate() == 0.39
    assert Settings(route_weights="keyword:1").gate() == 0.0  # no cosine to read


@pytest.mark.parametrize(
    ("weights", "message"),
    [("vectr:1", "unknown route 'vectr'"), ("keyword", "not route:weight"), ("exact:-1", ">= 0")],
)
def test_route_weights_are_checked(weights: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings(route_weights=weights)
