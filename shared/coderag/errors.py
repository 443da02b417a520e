"""The one exception tree of coderag; ``install_handlers`` maps it to HTTP.

CoderagError                 500  a bug or an unexpected state (never for bad input)
 ├── InvalidInput            400  the request is malformed; the message says what to fix
 ├── Unauthorized            401  missing or wrong token or webhook signature
 ├── Forbidden               403  the token's role or a setting does not allow the request
 ├── NotFound                404  unknown repository, session or job
 ├── Conflict                409  the resource exists or is busy
 ├── TooLarge                413  the request body is over its limit
 ├── Unavailable             503  a dependency (database, model, Redis, Chroma, retriever) is down
 └── ConfigError             ---  a setting points at nothing; raised at startup, not per request
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


class CoderagError(Exception):
    """Base of every error coderag raises on purpose."""

    status_code = 500

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidInput(CoderagError):
    """The caller sent something coderag cannot use."""

    status_code = 400


class Unauthorized(CoderagError):
    """Authentication failed."""

    status_code = 401


class Forbidden(CoderagError):
    """The caller is known but may not do this (role, or a setting forbids it)."""

    status_code = 403


class NotFound(CoderagError):
    """The named thing does not exist."""

    status_code = 404


class Conflict(CoderagError):
    """The named thing exists already or is in a state that forbids the request."""

    status_code = 409


class TooLarge(CoderagError):
    """The request body is larger than the server accepts."""

    status_code = 413


class Unavailable(CoderagError):
    """A dependency needed for the request is not reachable."""

    status_code = 503


class ConfigError(CoderagError):
    """A setting is wrong; raised at startup so the server never half-starts."""


BY_STATUS: dict[int, type[CoderagError]] = {
    400: InvalidInput,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    422: InvalidInput,
}
"""Another service's error statuses and the errors they are re-raised as (others: Unavailable)."""


def raise_for(resp: Any, service: str = "") -> None:
    """Re-raise another service's 4xx/5xx answer (an ``httpx.Response``) as the matching
    coderag error, its detail prefixed with the service's name when given."""
    if resp.status_code < 400:
        return
    try:
        detail = resp.json().get("detail", resp.text) if resp.content else resp.reason_phrase
    except ValueError:
        detail = resp.text
    raise BY_STATUS.get(resp.status_code, Unavailable)(
        f"{service}: {detail}" if service else str(detail)
    )


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_handlers(app: FastAPI) -> None:
    """Make every CoderagError and validation error a ``{"detail": ...}`` JSON response."""

    @app.exception_handler(CoderagError)
    async def _coderag(_: Request, exc: CoderagError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _validation_message(exc)}, status_code=422)
