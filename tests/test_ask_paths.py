"""One ask use case (issue 22): /ask as JSON, /ask as server-sent events, ``coderag ask --json``
and MCP's ``ask`` tool answer alike on a real git repository with three commits by three authors
(tree-sitter, the packaged encoders, embedded Chroma, the extractive backend): the same answer,
the same citations and the same git facts on every citation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from coderag_app import cli
from coderag_app.mcp_server import build_server
from coderag_app.server import create_app
from coderag_generator.client import ParserClient
from tests.test_answers import build_shop, index

pytestmark = pytest.mark.slow

QUESTIONS = (
    "What error does create_order raise when there are no items?",
    "Who changed the order timeout logic last month?",
    "When was cancel_expired_orders last modified?",
    "订单超时是怎么计算的？",
)
"""An explanation, two who/when questions answered from git history, a Chinese question."""

SAME = ("answer", "citations", "refused", "reason")
"""What every path must give alike (``took_ms`` differs by nature)."""


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    root, shas = build_shop(tmp_path / "shop")
    with TestClient(create_app()) as client:
        index(client, "shop", root)
        yield client, shas


def _json(client: TestClient, query: str) -> dict[str, Any]:
    r = client.post("/ask", json={"query": query, "repo": "shop"})
    assert r.status_code == 200, r.text
    return r.json()


def _sse(client: TestClient, query: str) -> dict[str, Any]:
    headers = {"Accept": "text/event-stream"}
    r = client.post("/ask", json={"query": query, "repo": "shop"}, headers=headers)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [block.split("\n", 1) for block in r.text.strip().split("\n\n")]
    names = [name.removeprefix("event: ") for name, _ in events]
    assert names[0] == "retrieval" and names[-1] == "done", names
    return json.loads(events[-1][1].removeprefix("data: "))


def _cli(query: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert cli.main(["ask", query, "--repo", "shop", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _mcp(client: TestClient, query: str) -> dict[str, Any]:
    def http() -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=client.app), base_url="http://localhost"
        )

    async def call() -> dict[str, Any]:
        async with Client(build_server(http)) as mcp:
            result = await mcp.call_tool("ask", {"query": query, "repo": "shop"})
        assert not result.is_error, result.content
        return result.structured_content or json.loads(result.content[0].text)

    return anyio.run(call)


def test_the_four_ask_paths_cite_alike_with_the_same_git_facts(
    shop: tuple[TestClient, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    client, shas = shop
    dated = 0
    for query in QUESTIONS:
        expected = _json(client, query)
        got = {"sse": _sse(client, query), "cli": _cli(query, capsys), "mcp": _mcp(client, query)}
        for path, body in got.items():
            assert {k: body[k] for k in SAME} == {k: expected[k] for k in SAME}, (path, query)
        for c in expected["citations"]:
            assert c["last_commit"] in shas.values() and c["last_author"], (query, c)
            dated += 1
    assert dated >= len(QUESTIONS), "every question is answered with dated citations"
    who = _json(client, QUESTIONS[1])
    assert f"`{shas['timeout']}` by Dana Scully" in who["answer"], who["answer"]


def test_the_parser_history_is_asked_once_per_answer(
    shop: tuple[TestClient, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, shas = shop
    calls: list[list[dict]] = []
    real = ParserClient.history

    async def counted(self: ParserClient, repo: str, ranges: list[dict], **window: Any) -> dict:
        calls.append(ranges)
        return await real(self, repo, ranges, **window)

    monkeypatch.setattr(ParserClient, "history", counted)
    for query in QUESTIONS:
        calls.clear()
        body = _json(client, query)
        assert body["citations"] and len(calls) == 1, (query, calls)
        assert all(c["last_commit"] in shas.values() for c in body["citations"]), body
