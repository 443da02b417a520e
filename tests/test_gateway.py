"""The compose gateway in one process: it forwards each contract path to its owner (here the
real all-in-one app behind an ASGI transport), gathers /health, and fails clearly."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from coderag.settings import Settings, get_settings
from coderag_app.gateway import PREFIXES, create_gateway, owner, upstreams_of
from coderag_app.server import create_app


def test_every_contract_path_has_one_owner() -> None:
    assert owner("/repos") == owner("/repos/x/reindex") == owner("/webhooks/github") == "parser"
    assert owner("/audit/export.csv") == "parser"
    assert owner("/search") == owner("/retrieve") == "retriever"
    assert owner("/ask") == "generator" and owner("/embed") == "embedder"
    assert owner("/asked") is None and owner("/") == owner("/static/app.js") == "parser"
    assert {service for _, service in PREFIXES} == set(upstreams_of(Settings()))


@pytest.mark.slow
def test_forwards_to_the_services_and_gathers_health(monkeypatch: pytest.MonkeyPatch) -> None:
    # the services answer to their compose names, as they do behind the gateway in compose
    monkeypatch.setenv("CODERAG_ALLOWED_HOSTS", "parser,embedder,retriever,generator,testserver")
    get_settings.cache_clear()
    with TestClient(create_app()) as backend:
        transport = httpx.ASGITransport(app=backend.app)
        upstreams = {s: f"http://{s}" for s in ("parser", "embedder", "retriever", "generator")}
        with TestClient(create_gateway(upstreams, transport)) as gateway:
            health = gateway.get("/health")
            assert health.status_code == 200, health.text
            assert set(health.json()["services"]) == set(upstreams)
            r = gateway.post("/repos", json={"name": "bad name!", "path": "/nowhere"})
            assert 400 <= r.status_code < 500 and "name" in r.text
            r = gateway.post("/search", json={"query": "x", "repo": "missing"})
            assert r.status_code == 404 and "missing" in r.json()["detail"]
            r = gateway.get("/audit/export.csv", params={"since": "2020-01-01T00:00:00Z"})
            assert r.status_code == 200 and r.text.startswith("id,ts,user")
            r = gateway.get("/nowhere")
            assert r.status_code == 404 and "/search" in r.json()["detail"]


@pytest.mark.parametrize("path", ["/health", "/search"])
def test_an_unreachable_service_is_a_clear_error(path: str) -> None:
    async def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    upstreams = {s: f"http://{s}" for s in ("parser", "embedder", "retriever", "generator")}
    gateway = create_gateway(upstreams, httpx.MockTransport(refuse))
    with TestClient(gateway) as client:
        r = client.get(path) if path == "/health" else client.post(path, json={})
    if path == "/health":
        assert r.status_code == 503
        assert {b["status"] for b in r.json()["services"].values()} == {"unreachable"}
    else:
        assert r.status_code == 502 and "retriever" in r.json()["detail"]
