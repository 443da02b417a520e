"""The compose gateway: one published port that forwards each path of the HTTP contract to the
service that owns it, streams the answer back (``/ask`` sends server-sent events), and answers
``/health`` with every service's own health. Run it with ``python -m coderag_app.gateway``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from coderag.settings import Settings, get_settings

PREFIXES = (
    ("/repos", "parser"),
    ("/webhooks", "parser"),
    ("/audit", "parser"),
    ("/search", "retriever"),
    ("/retrieve", "retriever"),
    ("/embed", "embedder"),
    ("/ask", "generator"),
    ("/v1", "generator"),
    ("/static", "parser"),
    ("/mcp", "parser"),
    ("/metrics", "parser"),
    ("/docs", "parser"),
    ("/openapi.json", "parser"),
)
"""Path prefixes and the service that serves them."""

HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host"}
)
"""Headers that describe one connection and are not forwarded."""

HEALTH_TIMEOUT_S = 5.0
"""How long /health waits for each service."""


def upstreams_of(settings: Settings) -> dict[str, str]:
    """Each service's base URL, from the settings."""
    return {
        "parser": settings.parser_url or "http://parser:8000",
        "embedder": settings.embedder_url or "http://embedder:8000",
        "retriever": settings.retriever_url or "http://retriever:8000",
        "generator": settings.generator_url,
    }


def owner(path: str) -> str | None:
    """The service that serves a path, or None."""
    if path == "/":
        return "parser"  # the web page; its assets are under /static
    for prefix, service in PREFIXES:
        if path == prefix or path.startswith(prefix + "/") or path.startswith(prefix + "."):
            return service
    return None


def _forwardable(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}


def create_gateway(
    upstreams: Mapping[str, str], transport: httpx.AsyncBaseTransport | None = None
) -> FastAPI:
    """The gateway app forwarding to ``upstreams`` (service name → base URL)."""
    client = httpx.AsyncClient(
        transport=transport, timeout=httpx.Timeout(600.0, connect=5.0), follow_redirects=False
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        await client.aclose()

    app = FastAPI(
        title="coderag gateway", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )

    @app.get("/health")
    async def health(request: Request) -> JSONResponse:
        """Every service's /health, and ok only when each of them is ok."""

        # the caller's token goes along: a service tells its dependencies only to an admin
        who = {k: v for k in ("authorization", "x-user") if (v := request.headers.get(k))}

        async def one(name: str, base: str) -> tuple[str, dict]:
            try:
                r = await client.get(f"{base}/health", timeout=HEALTH_TIMEOUT_S, headers=who)
                return name, r.json()
            except (httpx.HTTPError, ValueError) as exc:
                return name, {"status": "unreachable", "error": str(exc) or type(exc).__name__}

        results = dict(await asyncio.gather(*(one(n, b) for n, b in upstreams.items())))
        ok = all(body.get("status") == "ok" for body in results.values())
        return JSONResponse(
            {"status": "ok" if ok else "degraded", "services": results},
            status_code=200 if ok else 503,
        )

    @app.api_route(
        "/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    )
    async def forward(request: Request, path: str) -> Response:
        """Send the request on to its service and stream the response back."""
        service = owner(request.url.path)
        if service is None:
            known = ", ".join(p for p, _ in PREFIXES)
            return JSONResponse(
                {"detail": f"no service serves {request.url.path}; paths start with {known}"},
                status_code=404,
            )
        url = upstreams[service] + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        outgoing = client.build_request(
            request.method, url, headers=_forwardable(request.headers), content=request.stream()
        )
        try:
            upstream = await client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            return JSONResponse(
                {"detail": f"the {service} service is unreachable: {exc or type(exc).__name__}"},
                status_code=502,
            )
        return StreamingResponse(
            upstream.aiter_raw(),
            status_code=upstream.status_code,
            headers=_forwardable(upstream.headers),
            background=BackgroundTask(upstream.aclose),
        )

    return app


def main() -> None:
    """Serve the gateway on CODERAG_HOST:CODERAG_PORT."""
    import uvicorn

    settings = get_settings()
    app = create_gateway(upstreams_of(settings))
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info")


if __name__ == "__main__":
    main()
