"""The LLM guarantees through a real backend: the OpenAI-compatible backend against a small real
HTTP server on loopback that answers with scripted replies (a bad citation, then a good one), so
the retry-then-refuse path is exercised end to end; and contradicted premises (type C) corrected
from the retrieved code before any model is asked."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.schemas import Hit, RetrieveResponse
from coderag.settings import Settings
from coderag.store import get_catalog
from coderag_generator import prompts
from coderag_generator.answer import (
    NO_CITATION,
    PREMISE,
    REFUSED_BY_MODEL,
    Question,
    answer_events,
)
from coderag_generator.backends.openai import OpenAIBackend
from coderag_retriever import retrieval

Reply = Callable[[list[dict[str, str]]], str]


class Scripted(BaseHTTPRequestHandler):
    """/v1/models and a streaming /v1/chat/completions that plays the server's script."""

    server: ScriptedServer

    def log_message(self, *_: object) -> None:
        pass

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._json(200, {"data": [{"id": "scripted"}]})
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": "not found"})
            return
        self.server.requests.append(body)
        text = self.server.script.pop(0)(body["messages"])
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(0, len(text), 7):  # streamed in small pieces, as servers do
            chunk = {"choices": [{"delta": {"content": text[i : i + 7]}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


class ScriptedServer(ThreadingHTTPServer):
    """The server with its script of replies and the requests it received."""

    script: list[Reply]
    requests: list[dict[str, Any]]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(("127.0.0.1", 0), Scripted)
    srv.script, srv.requests = [], []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def bad(_: list[dict[str, str]]) -> str:
    """A reply citing a file that is not in the prompt."""
    return "ProcessOrder validates the request. See FILE: src/nowhere.go:1-4."


def good(messages: list[dict[str, str]]) -> str:
    """A reply citing the first anchor the prompt shows."""
    shown = re.search(r"FILE: (\S+:\d+-\d+)", messages[1]["content"])
    assert shown, "the prompt shows anchors"
    return f"ProcessOrder checks the request first. See FILE: {shown.group(1)}."


@pytest.fixture
def hits(sample_repo: Path) -> list[Hit]:
    get_catalog().create_repo("s", str(sample_repo), None, None)
    run_now(IndexRepo(repo="s"))
    query = "How does ProcessOrder validate the request?"
    return retrieval.retrieve("s", query, 5, Settings()).hits


def run(server: ScriptedServer, hits: list[Hit], query: str, *script: Reply) -> list:
    server.script = list(script)
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    settings = Settings(llm_backend="openai", llm_base_url=base, score_gate=0)
    backend = OpenAIBackend(settings)
    lines = lambda p: get_catalog().file_lines("s", p)  # noqa: E731
    found = RetrieveResponse(results=hits, took_ms=0.0)
    events = answer_events(
        Question(query), found, backend=backend, settings=settings, file_lines=lines
    )
    return list(events)


@pytest.mark.slow
def test_retry_then_refuse_through_a_real_server(server: ScriptedServer, hits: list[Hit]) -> None:
    query = "How does ProcessOrder validate the request?"
    events = run(server, hits, query, bad, good)
    names = [e.name for e in events]
    assert names.count("prompt") == 2 and "retry" in names and names[-1] == "done"
    retry = next(e for e in events if e.name == "retry")
    assert retry.data["invalid"] == 1
    done = events[-1].payload()
    assert done["refused"] is False and done["reason"] == "" and len(done["citations"]) == 1
    cite = done["citations"][0]
    assert any(
        h.file == cite["file"] and h.start_line <= cite["start_line"] <= h.end_line for h in hits
    )
    second = server.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": bad([])}
    assert second[-1]["content"].startswith(prompts.load("retry", "en").split("{")[0])

    events = run(server, hits, query, bad, bad)
    done = events[-1].payload()
    assert done["refused"] is True and done["reason"] == NO_CITATION and done["citations"] == []
    assert done["answer"] == prompts.load("refusal", "en")
    assert len(server.requests) == 4, "one answer and one retry, then refusal"

    events = run(server, hits, "订单是怎么处理的？", lambda _: prompts.load("refusal", "zh"))
    done = events[-1].payload()
    assert done["refused"] is True and done["reason"] == REFUSED_BY_MODEL
    assert done["answer"] == prompts.load("refusal", "zh") and len(server.requests) == 5


@pytest.mark.slow
def test_contradicted_premises_are_corrected_with_a_citation(
    server: ScriptedServer, hits: list[Hit]
) -> None:
    unit = next(h for h in hits if h.symbol.endswith("ProcessOrder"))
    for query, lang, marker in [
        ("ProcessOrder calls DeleteEverything, right?", "en", "does not call `DeleteEverything`"),
        ("ProcessOrder 调用了 DeleteEverything，对吗？", "zh", "并不调用 `DeleteEverything`"),
        ("ProcessOrder both returns an error and exits, right?", "en", "ends the process"),
    ]:
        # an empty script: the model must not be asked
        done = run(server, hits, query)[-1].payload()
        assert done["reason"] == PREMISE and done["refused"] is False, done
        assert marker in done["answer"], done["answer"]
        assert done["answer"].startswith("No —" if lang == "en" else "不对")
        assert done["citations"] and all(
            c["file"] == unit.file and unit.start_line <= c["start_line"] <= unit.end_line
            for c in done["citations"]
        )
    assert server.requests == []
    # a premise the code bears out goes to the model as usual
    called = unit.facts["calls"][0].split(" (")[0].rsplit(".", 1)[-1]
    done = run(server, hits, f"ProcessOrder calls {called}, right?", good)[-1].payload()
    assert done["reason"] == "" and len(server.requests) == 1
