"""The error answer of middleware that refuses a request before any router runs: ``{"detail"}``
with a status, as ``coderag.errors`` answers from the routers."""

from __future__ import annotations

import json

from starlette.types import Send


async def send_error(send: Send, status: int, detail: str, close: bool = False) -> None:
    """Answer ``{"detail": detail}`` with ``status``; ``close`` also ends the connection (the
    request body is left unread)."""
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json")]
    if close:
        headers += [(b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
