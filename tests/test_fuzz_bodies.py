"""Hostile bytes at every route of a real ``coderag serve`` (uvicorn), through one keep-alive
client: lone surrogates as JSON escapes (values and keys), surrogates encoded as UTF-8 bytes,
100000 nested lists, bytes that are not UTF-8, bodies just under and over the cap, values of the
wrong type, hostile query strings and header bytes. No answer may be a 5xx, no request may reset
the connection, and every request to an audited route leaves exactly one audit row, read back
through the export. The routes are listed from the app itself, so a new one is fuzzed too."""

from __future__ import annotations

import csv
import io
import json
import time
from collections import Counter
from pathlib import Path

import git
import httpx
import pytest
from starlette.routing import Route

from coderag_app.audit_http import AUDITED
from coderag_app.server import create_app
from tests.conftest import commit_all
from tests.liveserver import live_server, wait_complete

pytestmark = pytest.mark.slow

TOKEN = "fuzz-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BODY_CAP = 1_048_576
"""CODERAG_MAX_BODY_BYTES of the server (its default, set explicitly)."""
WEBHOOK_CAP = 2_000_000
"""CODERAG_MAX_WEBHOOK_BYTES of the server (smaller than the default, to keep the test quick)."""

SURROGATES = (
    '{"query": "why \\ud800", "repo": "small", "ref": "\\ud800", "name": "x\\udfff", '
    '"url": "https://127.0.0.1/\\ud800", "path": "/tmp/\\udc00", "branch": "\\ud800", '
    '"refs": ["\\ud800"], "session_id": "\\ud800", "texts": ["\\ud800"], "ranges": [{"file": '
    '"\\ud800", "start_line": 1, "end_line": 2}], "jsonrpc": "2.0", "method": "\\ud800", "id": 1}'
)
DEEP = "[" * 100_000 + "]" * 100_000


def _bodies(cap: int) -> dict[str, bytes]:
    """The hostile bodies, by name, for a route with this body cap."""

    def padded(size: int) -> bytes:
        head = b'{"query": "'
        tail = b'", "repo": "small"}'
        return head + b"a" * (size - len(head) - len(tail)) + tail

    return {
        "surrogate values": SURROGATES.encode(),
        "surrogate key": b'{"\\ud800": 1, "query": "x", "repo": "small"}',
        "surrogate pair split": b'{"query": "\\udc00\\ud800", "repo": "small"}',
        "surrogate as bytes": b'{"query": "\xed\xa0\x80", "repo": "small"}',
        "deep list": DEEP.encode(),
        "deep value": b'{"query": "x", "repo": "small", "ref": ' + DEEP.encode() + b"}",
        "not utf-8": b'{"query": "\xff\xfe caf\xe9", "repo": "small"}',
        "not json": b"query=x&repo=small",
        "empty": b"",
        "wrong types": json.dumps(
            {
                "query": 5,
                "repo": ["small"],
                "top_k": "many",
                "ref": {"a": 1},
                "refs": "main",
                "name": 12,
                "path": None,
                "url": True,
                "branch": [],
                "session_id": 3.5,
            }
        ).encode(),
        "top-level list": b"[1, 2, 3]",
        "top-level string": b'"\\ud800"',
        "huge number": b'{"query": "x", "repo": "small", "top_k": ' + b"9" * 5000 + b"}",
        "just under the cap": padded(cap - 16),
        "over the cap": padded(cap + 4096),
    }


QUERIES = {
    "surrogate escapes": "ref=%ED%A0%80&path=%ED%A0%80&q=%ED%A0%80&symbol=%ED%A0%80&kind=%ED%A0%80",
    "not utf-8": "ref=%FF%FE&path=%FF&since=%FF&until=%C0%AF&prefix=%FF",
    "wrong types": "start=abc&end=-1&limit=99999999999999999999999&top_k=x&since=soon",
    "long values": "q=" + "a" * 6000 + "&ref=" + "b" * 6000 + "&path=" + "c" * 6000,
}


def _routes() -> list[tuple[str, str]]:
    """Every (method, path) the app serves, path parameters filled in: repository names with
    ``small`` for reads, ``nope`` for writes (so no fuzz case deletes or reindexes it)."""
    out = []
    for route in _flat(create_app().routes):
        for method in sorted(route.methods or {"GET", "POST", "DELETE"}):  # /mcp: any
            if method == "HEAD" or (method, route.path) == ("GET", "/mcp"):
                continue  # GET /mcp opens an event stream: it is meant to stay open
            name = "small" if method == "GET" else "nope"
            path = route.path.replace("{name}", name).replace("{ref:path}", "main")
            path = path.replace("{ref}", "main").replace("{path:path}", "x")
            out.append((method, path))
    assert ("POST", "/search") in out and ("GET", "/metrics") in out and ("POST", "/mcp") in out
    return sorted(set(out))


def _flat(routes: list) -> list[Route]:
    """Every route, those of included routers too (FastAPI keeps those in the router's own list;
    coderag includes them without a prefix)."""
    out: list[Route] = []
    for route in routes:
        if isinstance(route, Route):
            out.append(route)
        elif (router := getattr(route, "original_router", None)) is not None:
            out += _flat(router.routes)
    return out


def test_every_route_survives_hostile_bytes(tmp_path: Path, data_dir: Path) -> None:
    repo = tmp_path / "small"
    repo.mkdir()
    (repo / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    commit_all(git.Repo.init(repo), "init")
    env = {
        "CODERAG_API_TOKENS": f"ada:{TOKEN}:admin",
        "CODERAG_EMBED_MODEL_2": "",
        "CODERAG_MAX_BODY_BYTES": str(BODY_CAP),
        "CODERAG_MAX_WEBHOOK_BYTES": str(WEBHOOK_CAP),
        "CODERAG_WEBHOOK_SECRET": "fuzz-secret",
        "CODERAG_URL_HOSTS": "127.0.0.1",
    }
    routes = _routes()
    failures: list[str] = []
    audited: Counter = Counter()
    sent = 0
    with (
        live_server(data_dir, **env) as base,
        httpx.Client(base_url=base, headers=AUTH, timeout=30) as http,
    ):
        assert http.post("/repos", json={"name": "small", "path": str(repo)}).status_code == 202
        assert wait_complete(http, "small")["status"] == "ready"
        first_id = _last_id(http)

        def send(method: str, path: str, label: str, **kw: object) -> None:
            nonlocal sent
            sent += 1
            try:
                r = http.request(method, path, **kw)
            except httpx.TransportError as exc:  # a reset, a cut stream, a timeout
                failures.append(f"{method} {path} [{label}]: {type(exc).__name__}: {exc}")
                return
            if r.status_code >= 500:
                failures.append(f"{method} {path} [{label}]: {r.status_code} {r.text[:300]}")
            route = path.split("?", 1)[0]  # the audit keys on the path, not the query
            if method == "POST" and route in AUDITED:
                audited[AUDITED[route]] += 1

        json_type = {"Content-Type": "application/json"}
        for method, path in routes:
            if method in ("POST", "PUT", "PATCH", "DELETE"):
                cap = WEBHOOK_CAP if path.startswith("/webhooks/") else BODY_CAP
                for label, body in _bodies(cap).items():
                    send(method, path, label, content=body, headers=json_type)
            for label, query in QUERIES.items():
                send(method, f"{path}?{query}", label)
            send(method, path, "header bytes", headers={"Authorization": b"Bearer \xff\xfe"})
            send(method, path, "user bytes", headers={"X-User": b"caf\xe9 \xff"})
        assert _answers(http), "the server stopped answering"

        expected = {endpoint: n for endpoint, n in audited.items()}
        rows = _rows_since(http, first_id, sum(expected.values()))
    got = Counter(r["endpoint"] for r in rows)
    assert not failures, f"{len(failures)} of {sent} requests failed:\n" + "\n".join(failures)
    assert dict(got) == expected, (got, expected)
    assert all(r["status"].startswith("error 4") for r in rows), {r["status"] for r in rows}


def _answers(http: httpx.Client) -> bool:
    return http.get("/repos/small").status_code == 200


def _export(http: httpx.Client) -> list[dict]:
    r = http.get("/audit/export.csv")
    assert r.status_code == 200, r.text
    return list(csv.DictReader(io.StringIO(r.text)))


def _last_id(http: httpx.Client) -> int:
    rows = _export(http)
    return int(rows[-1]["id"]) if rows else 0


def _rows_since(http: httpx.Client, first_id: int, want: int) -> list[dict]:
    """The rows written after ``first_id``, once ``want`` of them are there (a row is written
    after its answer is sent) or a few seconds have passed."""
    deadline = time.monotonic() + 10
    while True:
        rows = [r for r in _export(http) if int(r["id"]) > first_id]
        if len(rows) >= want or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)
