"""Requests checked before they cost anything, and every audited call leaves its row (issue 45,
findings 3, 4 and 5).

- A NUL character in a JSON body, a path or a query string is a 400 naming it, on SQLite and on
  a real PostgreSQL, and the audited endpoints' rows are written whatever the request (no token,
  a wrong one, a reader's), with the NUL stored as ``?``; the CSV export never carries a 0x00.
- An unsigned webhook is never parsed (its HMAC is checked first, over the raw bytes) and an
  unauthenticated API body is answered 401 unread (what that spares /health is a timing:
  ``bench/load_probe.py`` measures it).
- A streamed /ask the client drops mid-way is logged ``aborted`` in a row of its own, beside
  its internal /retrieve's (the app driven as a server drives it, with the disconnect a server
  sends when the client leaves).
"""

from __future__ import annotations

import csv
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from coderag.settings import get_settings
from coderag.store import get_catalog, reset_stores
from coderag_app import json_body, mcp_server
from coderag_app.mcp_server import build_server
from coderag_app.server import create_app
from harness.postgres import Postgres
from tests.conftest import wait_ready
from tests.test_answers import build_shop

TOKENS = "ada:reader-token:reader,root:admin-token:admin"
READER = {"Authorization": "Bearer reader-token"}
ADMIN = {"Authorization": "Bearer admin-token"}
WRONG = {"Authorization": "Bearer nope"}
NUL_QUERY = "where\u0000is the order"
WARM_UPS = ("cedict-warm", "coderag-redact-warm", "index-warm")
"""Threads the services start to load their tables; not what is measured."""


@pytest.fixture(params=["sqlite", "postgresql"])
def client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The all-in-one app with a reader and an admin token, on each database in turn."""
    monkeypatch.setenv("CODERAG_API_TOKENS", TOKENS)
    if request.param == "postgresql":
        postgres: Postgres = request.getfixturevalue("postgres")
        monkeypatch.setenv("CODERAG_DATABASE_URL", postgres.create())
    get_settings.cache_clear()
    reset_stores()
    with TestClient(create_app()) as c:
        yield c


def _rows(client: TestClient) -> list[dict[str, str]]:
    r = client.get("/audit/export.csv", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert b"\x00" not in r.content
    return list(csv.DictReader(io.StringIO(r.text)))


def test_nul_is_a_400_and_every_audited_call_keeps_its_row(client: TestClient) -> None:
    body = {"query": NUL_QUERY, "repo": "shop"}
    chat = {"model": "coderag:shop", "messages": [{"role": "user", "content": NUL_QUERY}]}
    probes = [
        ("/retrieve", body, READER, 400, "ada", "retrieve"),
        ("/search", body, READER, 400, "ada", "search"),
        ("/ask", body, READER, 400, "ada", "ask"),
        ("/v1/chat/completions", chat, READER, 400, "ada", "chat"),
        ("/search", body, {}, 401, "unauthenticated", "search"),
        ("/retrieve", body, WRONG, 401, "unauthenticated", "retrieve"),
    ]
    for path, payload, headers, status, _, _ in probes:
        r = client.post(path, json=payload, headers=headers)
        assert r.status_code == status, (path, headers, r.text)
        if status == 400:
            assert "NUL character" in r.text, (path, r.text)
    # a NUL in a path or a query string, on routes that are not audited
    for url in (
        "/repos/shop/file?path=a%00b",
        "/repos/shop/calls?symbol=pay%00",
        "/repos/sh%00op",
    ):
        r = client.get(url, headers=READER)
        assert r.status_code == 400 and "NUL character" in r.json()["detail"], (url, r.text)

    rows = _rows(client)
    got = [(row["user"], row["endpoint"], row["status"]) for row in rows]
    want = [(user, endpoint, f"error {status}") for _, _, _, status, user, endpoint in probes]
    assert got == want, got
    assert all(row["query"] == "where?is the order" for row in rows), rows


def test_an_mcp_tool_given_a_nul_fails_clearly_and_keeps_its_row(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_server, "STDIO_IDENTITY", {"authorization": "Bearer reader-token"})

    def http() -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=client.app), base_url="http://localhost"
        )

    async def call() -> tuple[bool, str]:
        async with Client(build_server(http)) as mcp:
            result = await mcp.call_tool("search_code", {"query": NUL_QUERY, "repo": "shop"})
        return result.is_error, str(result.content)

    failed, text = anyio.run(call)
    assert failed and "400" in text and "NUL character" in text, text
    rows = [row for row in _rows(client) if row["endpoint"] == "mcp/search_code"]
    assert [(r["user"], r["status"], r["query"]) for r in rows] == [
        ("ada", "error 400", "where?is the order")
    ], rows


def test_a_nul_stored_before_is_exported_without_the_byte(tmp_path: Path) -> None:
    """SQLite stored a NUL before it was refused: the CSV shows ``?`` in its place."""
    with TestClient(create_app()) as client:
        row = ("old", "search", "shop", "a\u0000b", "[]", 0, 1.0, "ok", "", "[]")
        get_catalog().audit_log.insert(row)
        rows = _rows(client)
    assert [row["query"] for row in rows] == ["a?b"]


def test_bodies_are_not_parsed_before_their_sender_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CODERAG_API_TOKENS", TOKENS)
    monkeypatch.setenv("CODERAG_WEBHOOK_SECRET", "s3cret")
    get_settings.cache_clear()
    walked: list[int] = []
    real = json_body.problem

    def spy(body: bytes, *rest: bool) -> str | None:
        walked.append(len(body))
        return real(body, *rest)

    monkeypatch.setattr(json_body, "problem", spy)
    # a push payload of three million small lists: seconds to parse and walk
    huge = json.dumps({"ref": "refs/heads/main", "commits": [[1, 2]] * 3_000_000}).encode()
    assert 20 << 20 < len(huge) <= 25 << 20
    big_api = json.dumps({"query": "q", "repo": "shop", "pad": [0] * 340_000}).encode()
    assert len(big_api) <= 1 << 20

    with TestClient(create_app()) as client:
        for thread in threading.enumerate():  # start-up warm-ups hold the GIL for seconds
            if thread.name in WARM_UPS:
                thread.join(300)
        assert client.get("/health").status_code == 200  # its first answer loads its checks
        for _ in range(3):
            r = client.post(
                "/webhooks/github",
                content=huge,
                headers={"X-Hub-Signature-256": "sha256=" + "0" * 64, "X-GitHub-Event": "push"},
            )
            assert r.status_code == 401, r.text
            r = client.post(
                "/search", content=big_api, headers={"Content-Type": "application/json"}
            )
            assert r.status_code == 401, r.text
            r = client.post(
                "/search",
                content=big_api,
                headers={**WRONG, "Content-Type": "application/json"},
            )
            assert r.status_code == 401, r.text
        # what the event loop is spared (/health's latency under these bodies) is a timing, which
        # bench/load_probe.py measures (docs/BENCHMARKS.md); here, that nothing was walked
        assert walked == [], "a body was walked before its sender was known"

        # a reader's body is checked (after the token); a signed webhook too
        r = client.post("/search", json={"query": NUL_QUERY, "repo": "x"}, headers=READER)
        assert r.status_code == 400 and walked, r.text


def _ask_and_leave(client: TestClient, query: str) -> list[bytes]:
    """POST /ask for an event stream straight into the app, and leave once its first event
    arrived: the next ``receive`` is the ``http.disconnect`` a server delivers when the client
    closes its connection, and nothing more can be sent. The chunks that were sent."""
    body = json.dumps({"query": query, "repo": "shop"}).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/ask",
        "raw_path": b"/ask",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"content-type", b"application/json"),
            (b"accept", b"text/event-stream"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    sent: list[bytes] = []

    async def run() -> None:
        left = anyio.Event()
        delivered = False

        async def receive() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await left.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            if left.is_set():
                await anyio.sleep_forever()  # a closed socket: the stream is stuck here
            if message["type"] == "http.response.body" and message.get("body"):
                sent.append(message["body"])
                left.set()

        with anyio.fail_after(120):
            await client.app(scope, receive, send)

    assert client.portal is not None
    client.portal.call(run)
    return sent


def test_an_aborted_stream_is_logged_aborted_in_its_own_row(tmp_path: Path) -> None:
    root, _ = build_shop(tmp_path / "shop")
    with TestClient(create_app()) as client:
        assert client.post("/repos", json={"name": "shop", "path": str(root)}).status_code == 202
        assert wait_ready(client, "shop", timeout=600)["status"] == "ready"
        sent = _ask_and_leave(client, "How is the order timeout computed?")
        assert sent and sent[0].startswith(b"event: retrieval"), sent
        assert not any(b"event: done" in chunk for chunk in sent), sent
        rows = _rows(client)
    # one row for the one request: its own /retrieve hands its row to the /ask (issue 43)
    assert [(row["endpoint"], row["status"]) for row in rows] == [("ask", "aborted")], rows
