"""``coderag serve``'s first minute (issue 43), on a real server process over an index on disk:
the port answers before the models are loaded, ``/health`` says ``loading`` and what, routes
that need the models answer 503 with ``Retry-After`` (never a hang or a 500), the log names each
stage, the ask path is warmed before the server says it is ready, and a start that fails exits
with the error."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import httpx
import pytest

from coderag.store import get_catalog, reset_stores
from harness.serve import start_server, stop_server
from tests.conftest import parse
from tests.liveserver import child_env

pytestmark = pytest.mark.slow

QUESTION = "How is an order created?"


def _line(log: list[str], words: str) -> int:
    """The index of the first log line holding ``words``."""
    found = [i for i, line in enumerate(log) if words in line]
    assert found, f"no log line says {words!r}:\n" + "\n".join(log[-40:])
    return found[0]


def test_the_port_answers_while_the_models_load_then_the_server_is_warm(
    sample_repo: Path, data_dir: Path, tmp_path: Path
) -> None:
    # an index on disk, as after a restart: the server warms the ask path on it
    get_catalog().create_repo("sample", str(sample_repo), None, None)
    parse("sample")
    reset_stores()
    log = tmp_path / "serve.log"
    # started, not waited on: the test watches /health answer "loading" before it is healthy
    server = start_server(child_env(data_dir), log=log)
    proc, base = server.proc, server.base
    seen: list[tuple[int, dict]] = []
    while_loading: dict[str, httpx.Response] = {}
    try:
        deadline = time.monotonic() + 600
        with httpx.Client(base_url=base, timeout=30) as http:
            while True:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, seen[-3:]
                try:
                    r = http.get("/health")
                except httpx.TransportError:
                    time.sleep(0.05)  # not bound yet
                    continue
                seen.append((r.status_code, r.json()))
                if r.status_code == 200:
                    break
                if not while_loading:
                    ask = {"query": QUESTION, "repo": "sample"}
                    while_loading["ask"] = http.post("/ask", json=ask)
                    chat = {
                        "model": "coderag/sample",
                        "messages": [{"role": "user", "content": "x"}],
                    }
                    while_loading["chat"] = http.post("/v1/chat/completions", json=chat)
                    while_loading["page"] = http.get("/", headers={"Accept": "text/html"})
                time.sleep(0.05)
            first_ask = http.post("/ask", json={"query": QUESTION, "repo": "sample"})
            audit = http.get("/audit/export.csv").text
    finally:
        stop_server(server)
    text = log.read_text(errors="replace")
    lines = text.splitlines()

    # the first answer on the port came while the models were still loading
    status, body = seen[0]
    assert status == 503 and body["status"] == "loading", seen[:3]
    assert body["loading"] and isinstance(body["loaded"], list), body
    assert any("encoders" in b.get("loading", "") for _, b in seen), [b for _, b in seen]
    assert seen[-1] == (200, {"status": "ok", "dependencies": seen[-1][1]["dependencies"]})

    # routes that need the models said so at once, with when to ask again
    for name, r in while_loading.items():
        assert r.status_code == 503 and r.headers["retry-after"].isdigit(), (name, r.text)
        assert "coderag is starting" in r.text, (name, r.text)
    assert while_loading["ask"].json()["detail"].startswith("coderag is starting: ")
    assert while_loading["chat"].json()["error"]["code"] == "service_unavailable"
    assert 'http-equiv="refresh"' in while_loading["page"].text.replace("'", '"')

    # the log: the port was bound before the models were loaded, each stage named, warmed first
    bound = _line(lines, "Uvicorn running on")
    encoders = _line(lines, "loaded the encoders")
    assert _line(lines, "loading the encoders") < encoders
    assert bound < encoders, "\n".join(lines[:40])
    assert encoders < _line(lines, "warmed the ask path on 'sample'") < _line(lines, "ready in")

    # ready: the first question is answered, and the warm-up's own question left no audit row
    assert first_ask.status_code == 200 and first_ask.json()["citations"], first_ask.text
    rows = list(csv.DictReader(io.StringIO(audit)))
    assert [(r["endpoint"], r["query"]) for r in rows] == [("ask", QUESTION)], rows


def test_a_start_that_fails_exits_with_the_error(data_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    env = child_env(data_dir, CODERAG_EMBED_MODEL=str(tmp_path / "no-such-model"))
    server = start_server(env, log=log)
    try:
        assert server.proc.wait(300) == 2
    finally:
        stop_server(server)
    text = log.read_text(errors="replace")
    assert "loading the encoders" in text and "failed" in text, text[-3000:]
    assert "error: encoder directory" in text and "no-such-model" in text, text[-3000:]
