"""What the OpenAPI schema says each error status returns: ``{"detail": "..."}``, always a
string (``errors.install_handlers`` writes validation errors the same way)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

REASONS = {
    400: "The request cannot be used; the detail says what to fix.",
    401: "Missing or unknown API token, or a webhook signature that does not match.",
    403: "The token's role, or a server setting, does not allow this.",
    404: "No such repository, session or job.",
    409: "The repository exists already or is not ready for this.",
    413: "The request body is over the server's limit.",
    422: "The body or a parameter does not match this schema.",
    503: "A dependency (the database, Chroma, Redis, the retriever, a model) is not reachable.",
}
"""The meaning of each error status coderag answers with."""

COMMON = (400, 401, 413, 422)
"""Statuses any route may answer: a body that is not JSON or a Host not allowed, no token, a
body over the cap, a body off the schema."""


class ErrorBody(BaseModel):
    """Every error response: a message saying what was wrong."""

    detail: str


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` entries for these error statuses."""
    return {code: {"model": ErrorBody, "description": REASONS[code]} for code in codes}
