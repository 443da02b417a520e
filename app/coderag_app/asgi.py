"""The error answer of middleware that refuses a request before any router runs: ``{"detail"}``
with a status, as ``coderag.errors`` answers from the routers."""

from __future__ import annotations

import json

from starlette.types import Send

from coderag_app.v1 import errors


async def send_error(
    send: Send, status: int, detail: str, close: bool = False, path: str = ""
) -> None:
    """Answer ``{"detail": detail}`` (OpenAI's error shape under /v1/) with ``status``; ``close``
    also ends the connection (the request body is left unread)."""
    shaped = errors.body(status, detail) if errors.wants(path) else {"detail": detail}
    body = json.dumps(shaped).encode()
    headers = [(b"content-type", b"application/json")]
    if close:
        headers += [(b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
