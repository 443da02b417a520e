"""JSON request bodies checked once, before any router reads them: text that is not UTF-8, a
lone UTF-16 surrogate written as an escape (``"\\ud800"``, which Python's JSON reader turns into
a string no database, subprocess or log can encode), a NUL character (``"\\u0000"``, which
PostgreSQL refuses in text and git in arguments) or nesting deeper than any request needs is
answered 400 saying what to fix, instead of failing wherever the text first meets an encoder.
A NUL in any request's path or query string is answered 400 the same way.

No body is parsed for a caller who could not send it: with tokens configured, a request without
a valid one is answered 401 unread (FastAPI would parse it before its token dependency runs), and
a webhook is walked only once its signature (an HMAC over the raw bytes, or GitLab's token)
proves its sender; the route then checks it again and parses it off the event loop. A large
body is walked in a worker thread, never on the event loop."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coderag.deps import current_principal
from coderag.errors import Unauthorized
from coderag.settings import get_settings
from coderag_app.asgi import send_error

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted (a coderag request needs a handful of levels;
Python's JSON reader fails near 1000)."""

BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
"""Methods whose bodies are checked."""

WEBHOOKS = "/webhooks/"
"""Paths of the forges' webhooks: no token, a signature instead."""

INLINE_BYTES = 64 * 1024
"""Bodies up to this size are walked on the event loop (a thread hop costs more)."""

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""A JSON escape of a UTF-16 surrogate: only a body holding one can hold a lone one."""

_NUL_ESCAPE = b"\\u0000"
"""The JSON escape of NUL: only a body holding it can hold a NUL character in its text."""

NUL_EXEMPT = ("/mcp",)
"""Paths whose bodies may carry NUL: an MCP tool's arguments reach the API as a request of its
own, which is refused there and audited as the tool's row (a refused JSON-RPC body would be
neither)."""

_NUL = "a NUL character (\\u0000), which no text coderag stores or searches may hold; remove it"


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


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def unauthorized(scope: Scope) -> str | None:
    """Why this request's token is refused (what the routes would answer 401), or None when
    it is good, tokens are off, or the path is a webhook's (signed, not tokened)."""
    if scope.get("path", "").startswith(WEBHOOKS):
        return None
    headers = _headers(scope)
    try:
        current_principal(get_settings(), headers.get("authorization"), headers.get("x-user"))
    except Unauthorized as exc:
        return exc.detail
    return None


SIGNATURES = {
    "github": "X-Hub-Signature-256",
    "gitea": "X-Gitea-Signature",
    "gitlab": "X-Gitlab-Token",
}
"""Each forge's webhook path and the header proving ``CODERAG_WEBHOOK_SECRET``."""


def unsigned(path: str, headers: dict[str, str], body: bytes) -> str | None:
    """Why a webhook body does not prove ``CODERAG_WEBHOOK_SECRET`` (the words its route would
    answer 401 with), or None when it does or the path is no forge's: GitHub's and Gitea's
    HMAC-SHA256 of the raw bytes, GitLab's token header."""
    provider = path.removeprefix(WEBHOOKS).strip("/")
    header = SIGNATURES.get(provider)
    if header is None:
        return None
    secret = get_settings().webhook_secret.encode()
    if not secret:
        return "webhooks are disabled: set CODERAG_WEBHOOK_SECRET on the server"
    given = headers.get(header.lower(), "")
    if not given:
        return f"missing {header} header; configure the webhook's secret"
    if provider == "gitlab":
        expected = secret.decode()
    else:
        digest = hmac.new(secret, body, hashlib.sha256).hexdigest()
        expected = f"sha256={digest}" if provider == "github" else digest
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return f"{header} does not match CODERAG_WEBHOOK_SECRET"
    return None


def url_problem(scope: Scope) -> str | None:
    """Why a request's path or query string cannot be used (a NUL in it), or None."""
    raw_path = scope.get("raw_path") or b""
    if "\x00" in scope.get("path", "") or b"%00" in raw_path:
        return f"the URL path holds {_NUL}"
    if b"\x00" in unquote_to_bytes(scope.get("query_string", b"") or b""):
        return f"the query string holds {_NUL}"
    return None


def problem(body: bytes, nul: bool = True) -> str | None:
    """Why a JSON body cannot be used, or None when it can (or is not JSON at all: the router
    then answers that itself); with ``nul``, a NUL character in its text is a reason too."""
    if nul and b"\x00" in body:
        return f"request body holds a NUL byte; {_NUL.split('; ', 1)[1]}"
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            f"request body is not UTF-8 text (byte {exc.start} is {body[exc.start]:#04x}); "
            "send JSON encoded as UTF-8"
        )
    escaped = _SURROGATE_ESCAPE.search(body) is not None
    nulled = nul and _NUL_ESCAPE in body
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
            if nulled and "\x00" in value:
                return f"{_where(path)} holds {_NUL}"
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
                if nulled and isinstance(key, str) and "\x00" in key:
                    return f"a key in {_where(path)} holds {_NUL}"
                stack.append((item, [*path, key]))
    return None


class JsonBodyMiddleware:
    """Read a JSON request body whole, answer 400 when ``problem`` finds one, else hand the same
    bytes on to the app (inside the body cap, which still counts them as they arrive)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the URL and the body, then run the app on it."""
        if scope["type"] == "http" and (why := url_problem(scope)) is not None:
            await _drain(receive)
            await send_error(send, 400, why, path=scope.get("path", ""))
            return
        if scope["type"] != "http" or scope.get("method") not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if (why := unauthorized(scope)) is not None:
            await _drain(receive)  # read, never parsed: the audit row still gets its bytes
            await send_error(send, 401, why, path=path)
            return
        if not _json_typed(scope):
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
        if path.startswith(WEBHOOKS):
            # the signature first, over the raw bytes and in a thread (hashing megabytes)
            why = await run_in_threadpool(unsigned, path, _headers(scope), body)
            if why is not None:
                await send_error(send, 401, why, path=path)
                return
        if body and (why := await _body_problem(path, body)) is not None:
            await send_error(send, 400, why, path=path)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _body_problem(path: str, body: bytes) -> str | None:
    """``problem`` of a request's body, walked in a thread when large."""
    nul = not path.startswith(NUL_EXEMPT)
    if len(body) <= INLINE_BYTES:
        return problem(body, nul)
    return await run_in_threadpool(problem, body, nul)


async def _drain(receive: Receive) -> None:
    """Read a request's body to its end (or the client's leaving) before answering it."""
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
