"""Request bodies capped while they stream in: an ASGI middleware that counts the bytes it hands
to the app (a missing or false Content-Length changes nothing) and answers 413 past the cap."""

from __future__ import annotations

from typing import Any

from coderag.settings import get_settings
from coderag_app.asgi import send_error

WEBHOOK_PREFIX = "/webhooks/"
"""Paths whose bodies get the larger webhook cap (forges send whole push payloads)."""


class BodyTooLarge(Exception):
    """Raised from ``receive`` once a body passes its cap; the middleware answers 413."""


def limit_for(path: str) -> int:
    """The body cap of a request path, in bytes."""
    settings = get_settings()
    webhook = path.startswith(WEBHOOK_PREFIX)
    return settings.max_webhook_bytes if webhook else settings.max_body_bytes


def _message(limit: int, path: str) -> str:
    setting = (
        "CODERAG_MAX_WEBHOOK_BYTES"
        if path.startswith(WEBHOOK_PREFIX)
        else ("CODERAG_MAX_BODY_BYTES")
    )
    return f"request body is over {limit} bytes, the limit of {path} ({setting})"


class BodyLimitMiddleware:
    """Answer 413 to any request whose body passes ``limit_for(path)`` bytes."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        """Count the body as the app reads it; replace whatever the app answers once over."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = limit_for(path)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"").decode("latin-1").strip()
        if declared.isdigit() and int(declared) > limit:
            await send_error(send, 413, _message(limit, path), close=True, path=path)
            return
        seen = 0
        over = False
        started = False

        async def counted() -> dict:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    over = True
                    raise BodyTooLarge(_message(limit, path))
            return message

        async def guarded(message: dict) -> None:
            nonlocal started
            if over:  # the app turned our exception into its own answer: answer 413 instead
                if not started:
                    started = True
                    await send_error(send, 413, _message(limit, path), close=True, path=path)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, guarded)
        except BodyTooLarge as exc:
            if not started:
                await send_error(send, 413, str(exc), close=True, path=path)
