"""Errors of the /v1 routes in OpenAI's shape, ``{"error": {message, type, param, code}}``, with
the status coderag's own error carries; other paths keep ``{"detail"}``."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from coderag.errors import CoderagError
from coderag.responses import COMMON, REASONS
from coderag_app.v1.schemas import ErrorResponse

PREFIX = "/v1/"
"""Paths answered in OpenAI's error shape."""

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
}
"""OpenAI's error ``type`` per status; anything else is a ``server_error``."""

CODES = {401: "invalid_api_key", 404: "model_not_found", 413: "request_too_large"}
"""The ``code`` that clients branch on, per status."""


def body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """The OpenAI error object for a status and message."""
    return {
        "error": {
            "message": message,
            "type": TYPES.get(status, "server_error"),
            "param": param,
            "code": CODES.get(status, "service_unavailable" if status == 503 else None),
        }
    }


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries of a /v1 route: these statuses and those any route may answer,
    each with OpenAI's error body."""
    return {
        code: {"model": ErrorResponse, "description": REASONS[code]}
        for code in sorted({*COMMON, *codes})
    }


def wants(path: str) -> bool:
    """Whether a request path gets OpenAI's error shape."""
    return path.startswith(PREFIX)


def install(app: FastAPI) -> None:
    """Answer errors of /v1 paths in OpenAI's shape; the handlers already installed answer the
    rest (call after ``coderag.errors.install_handlers``)."""
    previous = dict(app.exception_handlers)

    def wrap(kind: type[Exception], convert: Any) -> None:
        fallback = previous.get(kind)

        async def handler(request: Request, exc: Exception) -> Any:
            if wants(request.url.path):
                status, message, param = convert(exc)
                return JSONResponse(body(status, message, param), status_code=status)
            if fallback is None:
                raise exc
            return await fallback(request, exc)

        app.add_exception_handler(kind, handler)

    def coderag(exc: CoderagError) -> tuple[int, str, str | None]:
        return exc.status_code, exc.detail, "model" if exc.status_code == 404 else None

    def validation(exc: RequestValidationError) -> tuple[int, str, str | None]:
        first = exc.errors()[0] if exc.errors() else {}
        where = [str(p) for p in first.get("loc", ()) if p != "body"]
        parts = [
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: "
            f"{e.get('msg', 'invalid')}"
            for e in exc.errors()
        ]
        # OpenAI answers a malformed body with 400, which its clients raise as BadRequestError
        return 400, "; ".join(parts) or "invalid request body", ".".join(where) or None

    def http(exc: HTTPException) -> tuple[int, str, str | None]:
        return exc.status_code, str(exc.detail), None

    wrap(CoderagError, coderag)
    wrap(RequestValidationError, validation)
    wrap(HTTPException, http)
