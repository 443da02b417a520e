"""``coderag serve``'s first minute (issue 43): the port is bound at once and answers while the
services load behind it.

``Boot`` is the ASGI app uvicorn serves. Its lifespan returns at once, so uvicorn binds the port
within a second of the banner; a background task then builds the real app (importing torch,
tree-sitter, Chroma), runs its lifespan (the encoders, the search indexes, the answer backend),
warms the ask path, and only then hands it every request. Meanwhile ``/health`` answers 503 with
``"status": "loading"`` and what is loading, the page reloads itself until ready, and every other
route answers 503 with that in words and a ``Retry-After``: never a hang, never a 500. A start
that fails stops the server, which exits with the error as before.

It imports only the standard library and ``startup`` at module load: it runs before the rest."""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
from collections.abc import Awaitable, Callable
from typing import Any

from coderag_app import startup

RETRY_AFTER_S = 5
"""Seconds a client is told to wait before it asks again while the server loads."""

BODIED = ("POST", "PUT", "PATCH", "DELETE")
"""Methods whose request body a loading answer leaves unread: the connection is closed after."""

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Boot:
    """The served app: answers while ``build`` makes the real one and its lifespan and
    ``warm`` run on a background task, then passes every request to it."""

    def __init__(
        self,
        build: Callable[[], Any],
        warm: Callable[[Any], Awaitable[object]] | None = None,
        progress: startup.Progress = startup.PROGRESS,
    ) -> None:
        self.build = build
        self.warm = warm
        self.progress = progress
        self.app: ASGIApp | None = None
        self.error: BaseException | None = None
        self.on_failure: Callable[[], None] = lambda: None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection: lifespan events here, requests to the app once ready."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        app = self.app
        if app is not None:
            await app(scope, receive, send)
        elif scope["type"] == "http":
            await self._loading(scope, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1013})  # try again later

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """Start loading on start-up and report it complete at once; on shutdown stop the real
        app's lifespan (or the loading) before reporting that complete."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._stop = asyncio.Event()
                self._task = asyncio.get_running_loop().create_task(self._run())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _run(self) -> None:
        """Build the app on a thread (imports block), enter its lifespan, warm it, serve it
        until shutdown; a failure is kept and stops the server."""
        assert self._stop is not None
        try:
            with self.progress.stage("the services' code (torch, tree-sitter, Chroma)"):
                app = await asyncio.to_thread(self.build)
            # entered and left on this one task: the lifespans hold task groups (MCP's)
            async with app.router.lifespan_context(app):
                if self.warm is not None:
                    await self.warm(app)
                self.app = app
                self.progress.finish()
                await self._stop.wait()
        except Exception as exc:
            if self._stop.is_set():  # a lifespan that failed to close: the stop goes on
                startup.log.exception("shutting down: %s", exc)
                return
            self.error = exc
            self.progress.finish(str(exc) or type(exc).__name__)
            self.on_failure()

    async def _shutdown(self) -> None:
        """Let the real app's lifespan end; loading that is still under way is cancelled (a
        build still importing on its thread finishes there, unused)."""
        if self._task is None or self._stop is None:
            return
        self._stop.set()
        if self.app is None:
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def message(self) -> tuple[str, startup.Snapshot]:
        """What a request is told while the app is not serving, and the start-up's state."""
        snap = self.progress.snapshot()
        if snap.error is not None:
            return f"coderag could not start: {snap.error}", snap
        what = snap.loading or "the server"
        return (
            f"coderag is starting: {what} ({snap.elapsed_s:.0f} s so far); retry in a few seconds",
            snap,
        )

    async def _loading(self, scope: Scope, send: Send) -> None:
        """Answer a request that came before the app is ready: /health's loading state, a page
        that reloads itself, or a 503 saying what is loading."""
        detail, snap = self.message()
        path, method = scope.get("path", ""), scope.get("method", "GET")
        accept = dict(scope.get("headers") or []).get(b"accept", b"").decode("latin-1")
        if path == "/health":
            body: dict[str, Any] = {
                "status": "down" if snap.error else "loading",
                "loading": snap.loading,
                "loaded": snap.loaded,
                "elapsed_s": snap.elapsed_s,
                "detail": detail,
            }
            await _send(send, 503, "application/json", json.dumps(body).encode(), method)
        elif path in ("/", "/index.html") and "text/html" in accept and snap.error is None:
            await _send(send, 503, "text/html; charset=utf-8", _page(detail), method)
        else:
            if path.startswith("/v1/"):
                from coderag_app.v1 import errors  # OpenAI clients read their own error shape

                shaped: dict[str, Any] = errors.body(503, detail)
            else:
                shaped = {"detail": detail}
            await _send(send, 503, "application/json", json.dumps(shaped).encode(), method)


def _page(detail: str) -> bytes:
    """A page that says what is loading and reloads itself until the real page is served."""
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<meta http-equiv='refresh' content='2'><title>coderag is starting</title></head>"
        f"<body style='font-family:sans-serif;margin:3em'><h1>coderag is starting</h1>"
        f"<p>{html.escape(detail)}</p><p>This page reloads itself until it is ready.</p>"
        "</body></html>"
    ).encode()


async def _send(send: Send, status: int, kind: str, body: bytes, method: str) -> None:
    """Send a whole response with ``Retry-After``; the connection of a request whose body is
    left unread is closed after it."""
    headers = [
        (b"content-type", kind.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_S).encode()),
        (b"cache-control", b"no-store"),
    ]
    if method in BODIED:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
