"""Per-repository reads over HTTP (issue 45): while ``CODERAG_GRANTS`` is set, every request
runs with its caller's grants in force (``coderag.auth.reading``), and the catalog answers a
repository the caller may not read exactly as one that does not exist: every route, listing,
MCP tool (each calls the API with its caller's token), /v1 model and /metrics gauge reads
repositories through it, so none can forget the check."""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from coderag import auth
from coderag.deps import current_principal
from coderag.errors import ConfigError, Unauthorized
from coderag.settings import Settings, get_settings

WEBHOOKS = "/webhooks/"
"""Paths of the forges' signed pushes: they act for the server (the secret is the admin's) and
match the pushed URL against every registered repository."""


def check(settings: Settings) -> None:
    """ConfigError saying what to fix when grants are configured but cannot work: a file that
    is missing or malformed, or no tokens (every caller is then an admin and reads all)."""
    if settings.grants is None:
        return
    if not settings.principals():
        raise ConfigError(
            "CODERAG_GRANTS needs CODERAG_API_TOKENS: without tokens every caller is an admin "
            "and reads every repository"
        )
    try:
        auth.read_grants(settings.grants)
    except auth.GrantsError as exc:
        raise ConfigError(str(exc)) from None


def _nothing(_: str) -> bool:
    return False


def may_read(scope: Scope, settings: Settings) -> Callable[[str], bool] | None:
    """What the request's caller may read: None for every repository (no grants configured, an
    admin, a webhook), else its principal's check; a caller without a valid token reads
    nothing (its route answers 401 anyway)."""
    if settings.grants is None or scope.get("path", "").startswith(WEBHOOKS):
        return None
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    try:
        principal = current_principal(settings, headers.get("authorization"), headers.get("x-user"))
    except Unauthorized:
        return _nothing
    if principal.may("admin"):
        return None
    # the file is read (when it changed) once per request: a listing never mixes two versions
    return auth.current_grants(settings.grants).reader(principal.user)


class GrantsMiddleware:
    """Puts the caller's grants in force for the whole request, streamed bodies included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app with ``auth.reading`` set for an HTTP request."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = auth.reading.set(may_read(scope, get_settings()))
        try:
            await self.app(scope, receive, send)
        finally:
            auth.reading.reset(token)
