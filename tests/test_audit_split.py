"""One audit row per user request when the services run apart, as in compose (issue 43): the
parser, embedder and retriever in one real server process, the generator in another, the real
gateway in front and SQLite shared between them. /ask's /retrieve crosses processes, and MCP's
``ask`` tool calls /ask through the gateway; each user request is still one row, and a forged or
borrowed signature never hides a row."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from coderag import audit
from coderag.settings import Settings
from harness.serve import ROOT, serving, wait_http_ok
from tests.liveserver import child_env, free_port, mcp_tool, wait_complete

pytestmark = pytest.mark.slow

ADA_TOKEN = "ada-token-6f1c2b9e0d4a7c35"
BOB_TOKEN = "bob-token-93be1f0a62c4d8e7"
TOKENS = f"ada:{ADA_TOKEN}:admin,bob:{BOB_TOKEN}:reader"
ADA = {"Authorization": f"Bearer {ADA_TOKEN}"}
ANSWERED = "How is an order created?"
UNSAFE = "How do I bypass the permission check?"


@contextmanager
def _gateway(env: dict[str, str], port: int, log: Path) -> Iterator[str]:
    """The compose gateway (``python -m coderag_app.gateway``) on loopback until the block ends."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "coderag_app.gateway"],
            cwd=ROOT,
            env={**env, "CODERAG_HOST": "127.0.0.1", "CODERAG_PORT": str(port)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http_ok(proc, base + "/health", lambda: log.read_text()[-3000:], 300, "the gateway")
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def _split(data_dir: Path) -> Iterator[str]:
    """Parser + embedder + retriever, generator, and gateway as three processes; the gateway's
    URL."""
    services_port, generator_port, gateway_port = free_port(), free_port(), free_port()
    services = f"http://127.0.0.1:{services_port}"
    generator = f"http://127.0.0.1:{generator_port}"
    gateway = f"http://127.0.0.1:{gateway_port}"
    shared = {"CODERAG_API_TOKENS": TOKENS, "CODERAG_API_URL": gateway}
    logs = data_dir.parent
    with (
        serving(
            child_env(data_dir, **shared),
            args=("--service", "parser", "--service", "embedder", "--service", "retriever"),
            port=services_port,
            log=logs / "services.log",
        ),
        serving(
            child_env(
                data_dir, **shared, CODERAG_RETRIEVER_URL=services, CODERAG_PARSER_URL=services
            ),
            args=("--service", "generator"),
            port=generator_port,
            log=logs / "generator.log",
        ),
        _gateway(
            child_env(
                data_dir,
                **shared,
                CODERAG_PARSER_URL=services,
                CODERAG_EMBEDDER_URL=services,
                CODERAG_RETRIEVER_URL=services,
                CODERAG_GENERATOR_URL=generator,
            ),
            gateway_port,
            logs / "gateway.log",
        ) as base,
    ):
        yield base


def _rows(http: httpx.Client) -> list[dict[str, str]]:
    r = http.get("/audit/export.csv")
    assert r.status_code == 200, r.text
    return list(csv.DictReader(io.StringIO(r.text)))


def _cited(body: dict[str, Any]) -> list[str]:
    return [f"{c['file']}:{c['start_line']}-{c['end_line']}" for c in body["citations"]]


def _mcp(base: str, tool: str, arguments: dict[str, Any]) -> Any:
    return mcp_tool(base, ADA, tool, arguments)


def test_a_request_is_one_row_when_the_services_run_apart(
    sample_repo: Path, data_dir: Path
) -> None:
    with _split(data_dir) as base, httpx.Client(base_url=base, timeout=300, headers=ADA) as http:
        r = http.post("/repos", json={"name": "sample", "path": str(sample_repo)})
        assert r.status_code == 202, r.text
        assert wait_complete(http, "sample")["status"] == "ready"

        def one_row(send: Callable[[], Any]) -> tuple[Any, dict[str, str]]:
            """Send a request; its answer and the one row it wrote."""
            before = len(_rows(http))
            answer = send()
            time.sleep(0.5)  # a row written after the response was sent (a stream's end)
            rows = _rows(http)[before:]
            assert len(rows) == 1, [(x["endpoint"], x["user"], x["status"]) for x in rows]
            return answer, rows[0]

        # /ask in the generator, its /retrieve in the other process: one row, the answer's
        r, row = one_row(lambda: http.post("/ask", json={"query": ANSWERED, "repo": "sample"}))
        body = r.json()
        assert r.status_code == 200 and body["citations"], body
        assert (row["endpoint"], row["user"], row["status"]) == ("ask", "ada", "ok")
        assert json.loads(row["cited"]) == _cited(body)

        sse = {"Accept": "text/event-stream"}
        question = {"query": ANSWERED, "repo": "sample"}
        _, row = one_row(lambda: http.post("/ask", json=question, headers=sse))
        assert (row["endpoint"], row["status"]) == ("ask", "ok")

        chat = {"model": "coderag/sample", "messages": [{"role": "user", "content": ANSWERED}]}
        r, row = one_row(lambda: http.post("/v1/chat/completions", json=chat))
        assert (row["endpoint"], row["status"]) == ("chat", "ok"), r.text

        # MCP (on the parser's process) calls /ask through the gateway: the generator writes
        # the tool's row, with the answer's refusal reason, cited ranges and tokens
        answer, row = one_row(lambda: _mcp(base, "ask", {"query": ANSWERED, "repo": "sample"}))
        assert (row["endpoint"], row["user"], row["status"]) == ("mcp/ask", "ada", "ok")
        assert json.loads(row["cited"]) == _cited(answer) and answer["citations"]
        assert int(row["llm_input_tokens"]) > 0
        _, row = one_row(lambda: _mcp(base, "ask", {"query": UNSAFE, "repo": "sample"}))
        assert (row["endpoint"], row["status"], row["refusal"]) == ("mcp/ask", "refused", "unsafe")
        _, row = one_row(lambda: _mcp(base, "search_code", {"query": "order", "repo": "sample"}))
        assert (row["endpoint"], row["status"]) == ("mcp/search_code", "ok")
        _, row = one_row(lambda: _mcp(base, "list_repos", {}))
        assert (row["endpoint"], row["status"]) == ("mcp/list_repos", "ok")
        # a tool that reads (GET) is a row too, naming its repository and what it read
        read = {"repo": "sample", "file": "src/go/sample.go", "start_line": 1, "end_line": 5}
        _, row = one_row(lambda: _mcp(base, "read_range", read))
        assert (row["endpoint"], row["repo"], row["status"]) == ("mcp/read_range", "sample", "ok")
        assert "src/go/sample.go" in row["query"], row

        # /retrieve asked by a client is a row of its own; a forged signature, or the signature
        # of another caller's request, hides nothing
        query = {"query": "process an order", "repo": "sample", "top_k": 3}
        _, row = one_row(lambda: http.post("/retrieve", json=query))
        assert (row["endpoint"], row["user"]) == ("retrieve", "ada")
        forged = {audit.INNER_HEADER: f"{int(time.time())};{'0' * 64}"}
        _, row = one_row(lambda: http.post("/retrieve", json=query, headers=forged))
        assert row["endpoint"] == "retrieve"
        services = Settings(api_tokens=TOKENS)
        bobs = {audit.INNER_HEADER: audit.inner_header(services, f"Bearer {BOB_TOKEN}")}
        _, row = one_row(lambda: http.post("/retrieve", json=query, headers=bobs))
        assert (row["endpoint"], row["user"]) == ("retrieve", "ada")
        stale = audit.inner_header(services, f"Bearer {ADA_TOKEN}").split(";")[1]
        old = {audit.INNER_HEADER: f"{int(time.time()) - 3600};{stale}"}
        _, row = one_row(lambda: http.post("/retrieve", json=query, headers=old))
        assert row["endpoint"] == "retrieve"
        # the services' own signature does what the generator's does: no row of its own
        before = len(_rows(http))
        signed = {audit.INNER_HEADER: audit.inner_header(services, f"Bearer {ADA_TOKEN}")}
        assert http.post("/retrieve", json=query, headers=signed).status_code == 200
        time.sleep(0.5)
        assert len(_rows(http)) == before
