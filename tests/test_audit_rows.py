"""One audit row per user request (issue 43), on a real server over a real indexed git
repository: an /ask (JSON or streamed), a chat completion and an MCP ``ask`` over streamable HTTP
are each one row, though each calls /retrieve (and MCP /ask) inside itself; the row carries the
refusal reason and the cited ``FILE:start-end`` ranges, appended after the export's old columns."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.liveserver import live_server, mcp_tool, wait_complete

pytestmark = pytest.mark.slow

OLD_COLUMNS = [
    "id", "ts", "user", "endpoint", "repo", "query", "retrieved_files", "llm_input_tokens",
    "response_ms", "status",
]  # fmt: skip
"""The export's columns before issue 43, which keep their places."""

ANSWERED = "How is an order created?"
UNSAFE = "How do I bypass the permission check?"
ADA = {"X-User": "ada"}


def _export(http: httpx.Client) -> tuple[list[str], list[dict[str, str]]]:
    r = http.get("/audit/export.csv")
    assert r.status_code == 200, r.text
    reader = csv.DictReader(io.StringIO(r.text))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


def _cited(body: dict[str, Any]) -> list[str]:
    return [f"{c['file']}:{c['start_line']}-{c['end_line']}" for c in body["citations"]]


def _mcp_ask(base: str, query: str) -> dict[str, Any]:
    return mcp_tool(base, ADA, "ask", {"query": query, "repo": "sample"})


def test_each_request_is_one_row_with_its_refusal_and_cited_ranges(
    sample_repo: Path, data_dir: Path
) -> None:
    with (
        live_server(data_dir) as base,
        httpx.Client(base_url=base, timeout=300, headers=ADA) as http,
    ):
        r = http.post("/repos", json={"name": "sample", "path": str(sample_repo)})
        assert r.status_code == 202, r.text
        assert wait_complete(http, "sample")["status"] == "ready"

        def one_row(send: Any) -> tuple[Any, dict[str, str]]:
            """Send a request; its answer and the one row it wrote."""
            before = len(_export(http)[1])
            answer = send()
            rows = _export(http)[1][before:]
            assert len(rows) == 1, [(x["endpoint"], x["status"]) for x in rows]
            return answer, rows[0]

        # an answer: its row cites exactly what the answer cites
        r, row = one_row(lambda: http.post("/ask", json={"query": ANSWERED, "repo": "sample"}))
        body = r.json()
        assert r.status_code == 200 and not body["refused"] and body["citations"], body
        assert (row["endpoint"], row["user"], row["status"]) == ("ask", "ada", "ok")
        assert json.loads(row["cited"]) == _cited(body) and row["refusal"] == ""
        assert int(row["llm_input_tokens"]) > 0 and json.loads(row["retrieved_files"])

        # a refusal: its row says why, and cites nothing
        r, row = one_row(lambda: http.post("/ask", json={"query": UNSAFE, "repo": "sample"}))
        body = r.json()
        assert body["refused"] and body["reason"] == "unsafe", body
        assert (row["endpoint"], row["status"], row["refusal"]) == ("ask", "refused", "unsafe")
        assert json.loads(row["cited"]) == []

        # the same question streamed
        sse = {"Accept": "text/event-stream"}
        question = {"query": ANSWERED, "repo": "sample"}
        r, row = one_row(lambda: http.post("/ask", json=question, headers=sse))
        done = json.loads(r.text.strip().split("\n\n")[-1].split("data: ", 1)[1])
        assert (row["endpoint"], row["status"]) == ("ask", "ok")
        assert json.loads(row["cited"]) == _cited(done)

        # an OpenAI-compatible chat
        chat = {"model": "coderag/sample", "messages": [{"role": "user", "content": ANSWERED}]}
        r, row = one_row(lambda: http.post("/v1/chat/completions", json=chat))
        ext = r.json()["coderag"]
        assert (row["endpoint"], row["status"]) == ("chat", "ok")
        assert json.loads(row["cited"]) == _cited(ext) and ext["citations"]

        # MCP's ask tool, which calls /ask (which calls /retrieve) inside the server
        answer, row = one_row(lambda: _mcp_ask(base, ANSWERED))
        assert (row["endpoint"], row["user"], row["status"]) == ("mcp/ask", "ada", "ok")
        assert json.loads(row["cited"]) == _cited(answer) and answer["citations"]
        assert int(row["llm_input_tokens"]) > 0 and row["refusal"] == ""
        answer, row = one_row(lambda: _mcp_ask(base, UNSAFE))
        assert (row["endpoint"], row["status"], row["refusal"]) == ("mcp/ask", "refused", "unsafe")

        # /retrieve called by a client (not by /ask) is a request of its own
        query = {"query": "process an order", "repo": "sample", "top_k": 3}
        _, row = one_row(lambda: http.post("/retrieve", json=query))
        assert (row["endpoint"], row["status"], row["cited"]) == ("retrieve", "ok", "[]")

        header, rows = _export(http)
    assert header == [*OLD_COLUMNS, "refusal", "cited"]
    endpoints = [r["endpoint"] for r in rows]
    assert endpoints == ["ask", "ask", "ask", "chat", "mcp/ask", "mcp/ask", "retrieve"]
