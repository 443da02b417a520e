"""Request bodies are capped while they stream in (413), on a real uvicorn server and through the
app; /embed texts are capped; the audit CSV cannot carry a spreadsheet formula."""

from __future__ import annotations

import csv
import io
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from fastapi.testclient import TestClient

from coderag import audit
from coderag.store import get_catalog
from coderag_app.server import create_app
from tests.conftest import _free_port

MB = 1_048_576


@pytest.fixture
def server() -> Iterator[int]:
    """The parser service on a real uvicorn, on a free loopback port."""
    port = _free_port()
    config = uvicorn.Config(
        create_app(("coderag_parser",)), host="127.0.0.1", port=port, log_level="warning"
    )
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    yield port
    srv.should_exit = True
    thread.join(10)


def _raw(port: int, head: str, chunks: Iterator[bytes]) -> tuple[int, str]:
    """Send a request by hand (so no client fixes the framing) and read the response."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head.encode())
        try:
            for chunk in chunks:
                s.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the whole body was sent
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 20:
            more = s.recv(65536)
            if not more:
                break
            data += more
    status = int(data.split(b" ", 2)[1])
    return status, data.decode("latin-1")


def _chunked(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        yield f"{n:x}\r\n".encode() + b"x" * n + b"\r\n"
        sent += n
    yield b"0\r\n\r\n"


def test_chunked_body_without_length_is_cut_at_1mb(server: int) -> None:
    head = (
        "POST /repos HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    status, text = _raw(server, head, _chunked(2 * MB))
    assert status == 413 and "CODERAG_MAX_BODY_BYTES" in text, text[:400]
    # under the cap the same framing reaches the app, which finds it is not JSON
    status, text = _raw(server, head, _chunked(1000))
    assert status == 422, text[:400]


def test_declared_length_over_the_cap_is_refused_before_reading(server: int) -> None:
    head = (
        f"POST /repos HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {5 * MB}\r\n\r\n"
    )
    status, text = _raw(server, head, iter([b"{"]))  # one byte sent of the 5 MB announced
    assert status == 413 and "over 1048576 bytes" in text


def test_webhooks_get_25mb() -> None:
    with TestClient(create_app(("coderag_parser",))) as client:
        r = client.post("/webhooks/github", content=b"x" * (2 * MB))
        assert r.status_code == 401  # past the API cap, under the webhook one: reaches the check
        r = client.post("/webhooks/github", content=b"x" * (26 * MB))
        assert r.status_code == 413 and "CODERAG_MAX_WEBHOOK_BYTES" in r.json()["detail"]
        r = client.post("/repos", content=b"x" * (2 * MB), headers={"content-type": "text/plain"})
        assert r.status_code == 413


def test_embed_texts_are_capped() -> None:
    with TestClient(create_app(("coderag_embedder",))) as client:
        r = client.post("/embed", json={"texts": ["x" * 20_001]})
        assert r.status_code == 422 and "texts.0" in r.json()["detail"]
        r = client.post("/embed", json={"texts": ["ok"] * 257})
        assert r.status_code == 422 and "texts" in r.json()["detail"]
        assert client.post("/embed", json={"texts": ["def f(): pass"]}).status_code == 200


def test_audit_csv_cells_cannot_be_formulas() -> None:
    catalog = get_catalog()
    evil = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd", "plain"]
    for q in evil:
        audit.record(
            catalog,
            user="=cmd|' /C calc'!A0",
            endpoint="search",
            repo="r",
            query=q,
            files=[],
            input_tokens=0,
            response_ms=1.0,
            status="ok",
        )
    rows = list(csv.DictReader(io.StringIO("".join(audit.export_csv(catalog, None, None)))))
    assert [r["query"] for r in rows] == ["'" + q for q in evil[:-1]] + ["plain"]
    assert all(r["user"].startswith("'=") for r in rows)
    assert rows[0]["response_ms"] == "1.0"
