"""Evidence lines that answer (issue 31, lever 6): the retriever finds the statement of a unit
that does what the question asks, with the packaged encoders, and /ask quotes it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient

from coderag.schemas import Hit
from coderag_app.server import create_app
from coderag_retriever import focus
from coderag_retriever.query import Query
from coderag_retriever.text import query_tokens
from tests.conftest import commit_all, wait_ready

BILLING = '''"""Invoices."""


def invoice_total(invoice, discounts):
    """Return what the customer owes for an invoice."""
    if not invoice.lines:
        return 0
    currency = invoice.currency
    log.debug("pricing %s", invoice.id)
    subtotal = sum(line.amount * line.qty for line in invoice.lines)
    rebate = max(d.percent for d in discounts) if discounts else 0
    total = subtotal * (1 - rebate / 100) + invoice.shipping
    audit(invoice.id, total)
    return round(total, currency.digits)


def short(x):
    """Twice x."""
    return x * 2
'''

TOTAL_LINE = 12
REBATE_LINE = 11


def lines_of(text: str) -> list[str]:
    return text.splitlines()


def test_statements_skip_docs_comments_and_brackets_and_join_open_calls() -> None:
    src = lines_of(
        "def f(a,\n"
        "      b):\n"
        '    """Doc\n'
        '    more doc."""\n'
        "    # a comment\n"
        "    x = call(a,\n"
        "             b)\n"
        "\n"
        "    if x:\n"
        "        return {\n"
        "    }\n"
    )
    first = focus.body_start(src)
    assert first == 2  # the signature's second line is part of it
    found = [(s.first, s.last) for s in focus.statements(src, first)]
    assert found == [(5, 6), (8, 8), (9, 9)], found  # a brace opens a block: not joined


def test_best_without_vectors_goes_by_the_questions_words_and_skips_short_units() -> None:
    body = lines_of(BILLING)[3:14]
    terms = set(query_tokens("where is the rebate"))
    s = focus.best(terms, focus.candidates(terms, body), None)
    assert s is not None and body[s.first].strip().startswith("rebate =")
    none = set(query_tokens("nothing"))
    assert focus.best(none, focus.candidates(none, body), None) is None  # no word: no guess
    assert focus.candidates(terms, lines_of(BILLING)[16:]) == []  # too short to choose


def test_a_long_unit_is_read_in_a_bounded_batch_keeping_the_statements_with_the_words() -> None:
    body = ["def long(a):"] + [f"    x{i} = a + {i}" for i in range(60)] + ["    rebate = a / 2"]
    terms = set(query_tokens("rebate"))
    found = focus.candidates(terms, body)
    assert len(found) == focus.MAX_STATEMENTS
    assert found[-1].text == "rebate = a / 2" and found[0].text == "x0 = a + 0"


@pytest.fixture(scope="module")
def embed() -> focus.Embed:
    from coderag_embedder.queries import local

    embedder = local()
    return lambda texts: embedder.embed_queries(focus.SPACE, texts)


def billing_hit() -> Hit:
    text = "\n".join(lines_of(BILLING)[3:14])
    return Hit(file="billing.py", start_line=4, end_line=14, symbol="invoice_total",
               kind="function", language="python", score=1.0, text=text)  # fmt: skip


@pytest.mark.parametrize(
    ("question", "line"),
    [
        ("How is the invoice total computed?", TOTAL_LINE),
        ("Where is the rebate worked out?", REBATE_LINE),
    ],
)
def test_the_packaged_encoder_finds_the_statement_that_does_the_work(
    embed: focus.Embed, question: str, line: int
) -> None:
    [hit] = focus.with_focus(Query("billing", question, True, True), [billing_hit()], embed)
    assert (hit.focus_start, hit.focus_end) == (line, line), hit


def test_only_the_first_hits_get_a_focus_and_one_embedding_call_serves_them(
    embed: focus.Embed,
) -> None:
    calls = []

    def counting(texts: list[str]):  # type: ignore[no-untyped-def]
        calls.append(len(texts))
        return embed(texts)

    hits = [billing_hit() for _ in range(focus.HITS + 2)]
    out = focus.with_focus(Query("billing", "How is the total computed?"), hits, counting)
    assert [h.focus_start is not None for h in out] == [True] * focus.HITS + [False, False]
    assert len(calls) == 1
    nothing = Query("billing", "Which part decides what people pay?")
    failed = focus.with_focus(nothing, hits, lambda t: None)
    assert all(h.focus_start is None for h in failed)  # no vectors, no word: no focus at all


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        yield c


@pytest.mark.slow
def test_ask_quotes_the_line_deep_in_the_unit_that_answers(
    client: TestClient, tmp_path: Path
) -> None:
    root = tmp_path / "billing"
    (root / "billing").mkdir(parents=True)
    (root / "billing" / "invoices.py").write_text(BILLING)
    commit_all(git.Repo.init(root), "billing")
    assert client.post("/repos", json={"name": "billing", "path": str(root)}).status_code == 202
    assert wait_ready(client, "billing", timeout=600)["status"] == "ready"

    # no line holds two of the question's words: before the focus only the signature was quoted
    r = client.post("/ask", json={"repo": "billing", "query": "Where is the rebate worked out?"})
    assert r.status_code == 200, r.text
    body = r.json()
    spans = [(c["start_line"], c["end_line"]) for c in body["citations"]]
    assert any(s <= REBATE_LINE <= e and e - s <= 2 for s, e in spans), (spans, body["answer"])
    assert f"billing/invoices.py:{REBATE_LINE}" in body["answer"]

    r = client.post(
        "/search", json={"repo": "billing", "query": "How is the invoice total computed?"}
    )
    assert r.status_code == 200 and "focus_start" not in r.json()["results"][0], r.text
