"""Sessions (G8) through HTTP: the real app, extractive backend, a real indexed sample repository.
A follow-up ("what about its error handling?") is rewritten into a standalone retrieval query that
reaches the unit the previous answer was about; bad session ids are a 4xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag.schemas import RetrieveResponse
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_app.server import create_app
from coderag_generator import conversation
from coderag_generator.answer import Question, answer_events
from coderag_generator.backends.extractive import ExtractiveBackend
from coderag_generator.conversation import Turn, fit_history, key_terms, prompt_history, rewrite
from tests.conftest import wait_ready
from tests.hits import make_hit

GO = ("src/go/sample.go", "(*Service).ProcessOrder")


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        yield c


def index(client: TestClient, path: Path) -> None:
    assert client.post("/repos", json={"name": "s", "path": str(path)}).status_code == 202
    state = wait_ready(client, "s")
    assert state["status"] == "ready", state


def ask_stream(client: TestClient, body: dict) -> dict[str, list[dict]]:
    """The SSE events of one /ask, by name."""
    with client.stream("POST", "/ask", json=body, headers={"Accept": "text/event-stream"}) as s:
        assert s.status_code == 200
        raw = "".join(s.iter_text())
    events: dict[str, list[dict]] = {}
    for block in raw.strip().split("\n\n"):
        head, _, data = block.partition("\n")
        events.setdefault(head.removeprefix("event: "), []).append(
            json.loads(data.removeprefix("data: "))
        )
    return events


@pytest.mark.slow
def test_follow_up_is_rewritten_and_retrieves_the_unit(
    client: TestClient, sample_repo: Path
) -> None:
    index(client, sample_repo)
    first = client.post(
        "/ask",
        json={
            "query": "How does ProcessOrder validate the request?",
            "repo": "s",
            "session_id": "t1",
        },
    ).json()
    assert first["session_id"] == "t1"  # an unknown id starts a session and is echoed
    cited = first["citations"][0]
    assert cited["file"] == GO[0] and 10 <= cited["start_line"] <= cited["end_line"] <= 16

    follow = ask_stream(
        client, {"query": "what about its error handling?", "repo": "s", "session_id": "t1"}
    )
    retrieval = follow["retrieval"][0]
    # the pronoun becomes the cited symbol; the follow-up has a subject of its own (error
    # handling), so only the names the earlier question typed would be prepended: none is left
    assert retrieval["query"] == "Service.ProcessOrder's error handling?"
    assert (retrieval["results"][0]["file"], retrieval["results"][0]["symbol"]) == GO
    done = follow["done"][0]
    assert done["session_id"] == "t1" and done["citations"][0]["file"] == GO[0]

    zh = client.post(
        "/ask", json={"query": "那它的错误处理呢？", "repo": "s", "session_id": "t1"}
    ).json()
    first = zh["citations"][0]
    assert first["file"] == GO[0] and 10 <= first["start_line"] <= first["end_line"] <= 16
    assert f"FILE: {GO[0]}:{first['start_line']}-{first['end_line']}" in zh["answer"]

    turns = conversation.recent(get_catalog(), "t1", "s", limit=100)
    assert [t.role for t in turns] == ["user", "assistant"] * 3
    assert turns[2].content == "what about its error handling?"
    assert turns[2].query == retrieval["query"]
    assert turns[1].symbols[0] == GO[1] and turns[-1].content == zh["answer"]

    # another session has no history: the same words are not rewritten
    other = ask_stream(
        client, {"query": "what about its error handling?", "repo": "s", "session_id": "other"}
    )
    assert other["retrieval"][0]["query"] == "what about its error handling?"
    # no session at all: nothing is stored
    assert (
        client.post("/ask", json={"query": "who calls it?", "repo": "s"}).json()["session_id"]
        is None
    )
    assert len(conversation.recent(get_catalog(), "other", "s", limit=100)) == 2


@pytest.mark.parametrize(
    "bad", ["", "has space", "x" * 129, "../etc/passwd", "ünïcode", "a/b", "semi;colon"]
)
def test_bad_session_ids_are_400(client: TestClient, bad: str) -> None:
    r = client.post("/ask", json={"query": "where?", "repo": "nope", "session_id": bad})
    assert r.status_code == 400 and "session_id" in r.json()["detail"], r.text
    r = client.post(
        "/ask",
        json={"query": "where?", "repo": "nope", "session_id": bad},
        headers={"Accept": "text/event-stream"},
    )
    assert r.status_code == 400


def test_good_session_id_reaches_the_repo_check(client: TestClient) -> None:
    sid = "A-z_0.9" + "x" * 121  # 128 characters, every allowed kind
    r = client.post("/ask", json={"query": "where?", "repo": "nope", "session_id": sid})
    assert r.status_code == 404, r.text
    assert client.post("/ask", json={"query": "q", "repo": "s", "session_id": 7}).status_code == 422


def _conversation(question: str, symbols: list[str]) -> list[Turn]:
    return [
        Turn("user", question, "", {"query": question}),
        Turn("assistant", "The answer (see FILE: a.py:1-2).", "", {"symbols": symbols}),
    ]


def test_rewrite_rules() -> None:
    go = _conversation("How does the service process an order?", ["(*Service).ProcessOrder"])
    cases = {
        "what about its error handling?": "Service.ProcessOrder's error handling?",
        "那它的错误处理呢？": "Service.ProcessOrder的错误处理呢？",
        "Who calls this function?": "Who calls Service.ProcessOrder?",
        "这个函数在哪里被调用？": "Service.ProcessOrder在哪里被调用？",
        "is that thread-safe?": "is Service.ProcessOrder thread-safe?",
        "What about logging?": "service process order logging?",
        "还有日志呢？": "service process order 日志呢？",
        # questions that stand alone are left alone
        "Where is the config loaded?": "Where is the config loaded?",
        "where is the code that parses arguments?": "where is the code that parses arguments?",
    }
    for query, expected in cases.items():
        assert rewrite(query, go) == expected, query
    assert rewrite("what about its error handling?", []) == "what about its error handling?"
    # no cited symbol: the previous question's subject stands in
    zh = _conversation("订单是怎么创建的？", [])
    assert key_terms("订单是怎么创建的？") == ["订单", "创建"]
    assert rewrite("那它的错误处理呢？", zh) == "订单 创建的错误处理呢？"
    # a chain keeps its subject: the stored retrieval query, not the bare words, is reused
    chained = [Turn("user", "and its tests?", "", {"query": "ProcessOrder tests"})]
    assert rewrite("what about logging?", chained) == "ProcessOrder tests logging?"
    # a follow-up with a subject of its own borrows only the names of the previous one
    cors = _conversation("How does the CORS middleware decide which origins are allowed?", [])
    assert (
        rewrite("and where is the allowed origin checked?", cors)
        == "CORS where is the allowed origin checked?"
    )
    assert rewrite("and what about the max age header?", cors) == "CORS the max age header?"
    # ... and never the symbol a rewrite put in place of "it": the next subject is its own
    trust = "How does uvicorn decide whether to trust the X-Forwarded-For header?"
    chain = [
        *_conversation(trust, ["get_trusted_client_host"]),
        Turn(
            "user",
            "Who last changed it?",
            "",
            {"query": "Who last changed get_trusted_client_host?"},
        ),
        Turn("assistant", "...", "", {"symbols": ["get_trusted_client_host"]}),
    ]
    assert "Who last changed get_trusted_client_host?" in rewrite("Who last changed it?", chain[:2])
    ws = "And where are WebSocket messages limited in size?"
    assert rewrite(ws, chain) == "where are WebSocket messages limited in size?"


def test_history_goes_into_the_prompt_within_budget() -> None:
    turns = [
        *_conversation("How is an order created?", ["OrderService.create"]),
        *_conversation("what about its error handling?", ["OrderService.create"]),
    ]
    history = prompt_history([turns[-1], *turns])  # a leading answer is dropped
    assert [m["role"] for m in history] == ["user", "assistant"] * 2
    words = lambda text: len(text.split())  # noqa: E731
    assert fit_history(history, words, 10_000) == history
    assert fit_history(history, words, 20) == history[2:]  # the newest exchange that fits
    assert fit_history(history, words, 3) == []

    hit = make_hit(file="a.py", end_line=2, symbol="create", text="def create():\n    pass")
    backend = ExtractiveBackend()
    no_gate = get_settings().model_copy(update={"score_gate": 0.0})  # a hand-made hit

    def prompt_tokens(past: list[dict[str, str]]) -> int:
        question = Question("and the tests?", history=past)
        found = RetrieveResponse(results=[hit], took_ms=0.0)
        events = answer_events(
            question, found, backend=backend, settings=no_gate, file_lines=lambda _: 2
        )
        return next(e for e in events if e.name == "prompt").data["input_tokens"]

    extra = sum(len(m["content"].split()) for m in history)
    assert prompt_tokens(history) == prompt_tokens([]) + extra
