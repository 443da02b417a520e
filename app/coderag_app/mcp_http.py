"""/mcp on the server: the MCP server's streamable HTTP endpoint behind coderag's own tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from coderag.deps import current_principal
from coderag.errors import Unauthorized
from coderag.settings import get_settings
from coderag_app.asgi import send_error
from coderag_app.mcp_server import build_server

MCP_PATH = "/mcp"
"""Where the streamable HTTP transport is served."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class _TokenGate:
    """Refuses /mcp requests without a valid token (when tokens are configured), as a 401."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])
        }
        try:
            current_principal(get_settings(), headers.get("authorization"), headers.get("x-user"))
        except Unauthorized as exc:
            await send_error(send, 401, exc.detail)
            return
        await self.app(scope, receive, send)


def install(app: FastAPI):
    """Add /mcp to ``app``; returns the lifespan that runs its session manager."""
    settings = get_settings()

    def client() -> httpx.AsyncClient:
        if settings.api_url:
            return httpx.AsyncClient(base_url=settings.api_url, timeout=600)
        return httpx.AsyncClient(
            base_url="http://localhost", transport=httpx.ASGITransport(app=app), timeout=600
        )

    # over HTTP the services of this deployment write the tool's row (one row per call)
    server = build_server(client, remote=bool(settings.api_url))
    # DNS-rebinding protection only where it means something: a server on loopback.
    security: TransportSecuritySettings | None = TransportSecuritySettings(
        enable_dns_rebinding_protection=False
    )
    if settings.host in LOOPBACK:
        security = None
    starlette_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=security,
        host=settings.host,
    )
    for route in starlette_app.routes:
        if isinstance(route, Route) and route.path == MCP_PATH:
            app.router.routes.append(
                Route(MCP_PATH, _TokenGate(route.endpoint), methods=route.methods)
            )

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        manager = server.session_manager
        # The SDK runs one manager once; an app's lifespan may run again, even while an earlier
        # run is still up (a test client per request, a reloaded server). Stateless, the manager
        # keeps nothing between runs, so a nested run shares the one that is up.
        if manager._has_started:
            yield
            return
        try:
            async with manager.run():
                yield
        finally:
            manager._has_started = False

    return lifespan
