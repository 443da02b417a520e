"""Audit rows for the calls an endpoint could not log itself: bad input, auth failures, crashes,
aborted streams, and /retrieve. An endpoint that writes its own row (with files and tokens) marks
the request through ``audit.current_call``, so no call is logged twice; a request made inside
another one in this process (/ask's own /retrieve, the /ask of an MCP tool) hands its row to that
one (``audit.Call.outer``), one signed by another service (compose) writes none
(``audit.is_inner``), and one an MCP server sends over HTTP is its tool's row
(``audit.TOOL_HEADER``, any method), so one user request is one row."""

from __future__ import annotations

import json
import logging
import re
import time
from urllib.parse import unquote, unquote_plus

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coderag import audit
from coderag.deps import current_principal
from coderag.errors import Unauthorized
from coderag.redact import redact
from coderag.settings import get_settings
from coderag.store import get_catalog

AUDITED = {
    "/search": "search",
    "/ask": "ask",
    "/retrieve": "retrieve",
    "/v1/chat/completions": "chat",
}
"""Paths whose every POST writes a row, and the endpoint name in the log."""

STREAMED = ("ask", "chat")
"""Endpoints that write their own row when their answer is whole: one the middleware must write
after a success status was sent ended early (the client left, or the stream broke)."""

ROW_WRITTEN = (audit.TOOL_HEADER.encode(), b"written")
"""The response header that tells an MCP server this service writes its tool's row."""

TOOL_NAME = re.compile(r"[a-z][a-z_]{0,39}")
"""An MCP tool's name as ``TOOL_HEADER`` may give it."""

MAX_QUERY_CHARS = 4000
"""Longest query text stored for a rejected request."""

log = logging.getLogger(__name__)


def _user(headers: dict[str, str]) -> str:
    try:
        principal = current_principal(
            get_settings(), headers.get("authorization"), headers.get("x-user")
        )
    except Unauthorized:
        return "unauthenticated"
    return principal.user


def _fields(body: bytes) -> tuple[str, str]:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, RecursionError):  # not JSON, or nested past what Python reads
        return "", ""
    if not isinstance(data, dict):
        return "", ""
    repo, query = data.get("repo"), data.get("query")
    if isinstance(data.get("messages"), list):  # a chat: the model and its last message
        repo = str(data.get("model") or "").removeprefix("coderag/")
        last = data["messages"][-1] if data["messages"] else {}
        query = last.get("content") if isinstance(last, dict) else None
    if isinstance(query, str):
        query = redact(query)[0]  # a secret pasted into a question never reaches the log
    return (repo if isinstance(repo, str) else "")[:64], (query if isinstance(query, str) else "")[
        :MAX_QUERY_CHARS
    ]


def _target(scope: Scope) -> tuple[str, str]:
    """The repository a path names (``/repos/{name}/...``) and the query string, redacted: what
    a GET's row records (an MCP tool's read of a file or the call graph)."""
    parts = scope.get("path", "").split("/")
    repo = unquote(parts[2])[:64] if len(parts) > 2 and parts[1] == "repos" else ""
    raw = scope.get("query_string", b"").decode("latin-1")
    return repo, redact(unquote_plus(raw))[0][:MAX_QUERY_CHARS]


def _files(body: bytes) -> list[str]:
    try:
        results = json.loads(body).get("results", [])
        return list(dict.fromkeys(r["file"] for r in results))
    except (ValueError, AttributeError, KeyError, TypeError, RecursionError):
        return []


class AuditMiddleware:
    """Writes the row of an audited request that reached its end without one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # header bytes are latin-1 (ASGI); any byte may arrive, none may stop the row
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])
        }
        tool = headers.get(audit.TOOL_HEADER, "")
        endpoint = AUDITED.get(scope.get("path", "")) if scope.get("method") == "POST" else None
        if TOOL_NAME.fullmatch(tool):
            endpoint = f"mcp/{tool}"
        if endpoint is None:
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        request_body, response_body = bytearray(), bytearray()
        status = {"code": 500}

        async def receive_body() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request_body.extend(message.get("body", b""))
            return message

        async def send_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                if call.endpoint:  # the MCP server learns that its tool's row is written here
                    message = {
                        **message,
                        "headers": [*message.get("headers", []), ROW_WRITTEN],
                    }
            elif message["type"] == "http.response.body" and endpoint == "retrieve":
                response_body.extend(message.get("body", b""))
            await send(message)

        user = _user(headers)
        outer = audit.current_call.get()
        if outer is not None and user == "anonymous":
            user = outer.user  # /ask's in-process /retrieve acts for /ask's caller
        call = audit.Call(
            user, outer=outer, endpoint=endpoint if endpoint.startswith("mcp/") else ""
        )
        # another service's request inside a user's: the outer request's row records it
        call.discard = audit.is_inner(
            get_settings(), headers.get(audit.INNER_HEADER), headers.get("authorization", "")
        )
        token = audit.current_call.set(call)
        try:
            await self.app(scope, receive_body, send_status)
        finally:
            try:
                if not call.recorded:
                    # parsing the body and writing the row block: a thread's work, which a client
                    # leaving (a cancelled request) must not stop; this request's call is still
                    # the current one there, so the row marks it and no outer request's (an
                    # in-process /retrieve under /ask would otherwise mark /ask's as written)
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(
                            self._logged,
                            endpoint,
                            user,
                            status["code"],
                            request_body,
                            response_body,
                            start,
                            _target(scope),
                        )
            finally:
                audit.current_call.reset(token)

    @classmethod
    def _logged(
        cls,
        endpoint: str,
        user: str,
        code: int,
        request_body: bytearray,
        response_body: bytearray,
        start: float,
        target: tuple[str, str] = ("", ""),
    ) -> None:
        try:
            cls._record(endpoint, user, code, request_body, response_body, start, target)
        except Exception:  # the answer is sent; a row that cannot be written is logged
            log.exception("audit row of %s by %s not written", endpoint, user)

    @staticmethod
    def _record(
        endpoint: str,
        user: str,
        code: int,
        request_body: bytearray,
        response_body: bytearray,
        start: float,
        target: tuple[str, str] = ("", ""),
    ) -> None:
        outcome = "ok" if code < 400 else f"error {code}"
        if code < 400 and endpoint in STREAMED:
            outcome = "aborted"  # the stream ended before its done event, which writes the row
        repo, query = _fields(bytes(request_body))
        repo, query = repo or target[0], query or target[1]
        audit.record(
            get_catalog(),
            user=user,
            endpoint=endpoint,
            repo=repo,
            query=query,
            files=_files(bytes(response_body)) if code < 400 else [],
            input_tokens=0,
            response_ms=(time.perf_counter() - start) * 1000,
            status=outcome,
        )
