"""JSON request bodies checked once, before any router reads them: text that is not UTF-8, a
lone UTF-16 surrogate written as an escape (``"\\ud800"``, which Python's JSON reader turns into
a string no database, subprocess or log can encode) or nesting deeper than any request needs is
answered 400 saying what to fix, instead of failing wherever the text first meets an encoder."""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coderag_app.asgi import send_error

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted (a coderag request needs a handful of levels;
Python's JSON reader fails near 1000)."""

BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
"""Methods whose bodies are checked."""

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A JSON escape of a UTF-16 surrogate: only a body holding one can hold a lone one."""


def _json_typed(scope: Scope) -> bool:
    """Whether FastAPI would read this request's body as JSON (no content type, or a JSON one);
    webhook bodies are always JSON, whatever the forge sends as content type."""
    if scope.get("path", "").startswith("/webhooks/"):
        return True
    ctype = dict(scope.get("headers") or []).get(b"content-type", b"").decode("latin-1")
    kind = ctype.split(";", 1)[0].strip().lower()
    return not kind or kind == "application/json" or kind.endswith("+json")


def _where(path: list[str | int]) -> str:
    """A JSON path as the error messages write it (``refs.0``; ``body`` for the top level)."""
    return ".".join(str(p) for p in path) or "body"


def _bad_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def problem(body: bytes) -> str | None:
    """Why a JSON body cannot be used, or None when it can (or is not JSON at all: the router
    then answers that itself)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            f"request body is not UTF-8 text (byte {exc.start} is {body[exc.start]:#04x}); "
            "send JSON encoded as UTF-8"
        )
    escaped = _SURROGATE_ESCAPE.search(body) is not None
    try:
        data = json.loads(body)
    except RecursionError:
        return f"request body nests arrays or objects deeper than {MAX_DEPTH} levels"
    except ValueError:
        return None  # not JSON: the route's own validation says so
    stack: list[tuple[Any, list[str | int]]] = [(data, [])]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if escaped and _bad_text(value):
                return (
                    f"{_where(path)} holds a lone UTF-16 surrogate (an escape such as \\ud800 "
                    "without its pair); send valid Unicode text"
                )
        elif isinstance(value, dict | list):
            if len(path) >= MAX_DEPTH:
                return f"request body nests arrays or objects deeper than {MAX_DEPTH} levels"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if escaped and isinstance(key, str) and _bad_text(key):
                    return (
                        f"a key in {_where(path)} holds a lone UTF-16 surrogate (an escape such "
                        "as \\ud800 without its pair); send valid Unicode text"
                    )
                stack.append((item, [*path, key]))
    return None


class JsonBodyMiddleware:
    """Read a JSON request body whole, answer 400 when ``problem`` finds one, else hand the same
    bytes on to the app (inside the body cap, which still counts them as they arrive)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the body, then run the app on it."""
        if (
            scope["type"] != "http"
            or scope.get("method") not in BODY_METHODS
            or not _json_typed(scope)
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and (why := problem(body)) is not None:
            await send_error(send, 400, why, path=scope.get("path", ""))
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
