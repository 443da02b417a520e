"""Typed FastAPI dependencies shared by every router; tests override ``get_settings``."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Header

from coderag.errors import Conflict, InvalidInput, Unauthorized
from coderag.settings import Settings, get_settings
from coderag.store import Catalog, get_catalog

SettingsDep = Annotated[Settings, Depends(get_settings)]
"""The settings of this request."""


def catalog_dep(settings: SettingsDep) -> Catalog:
    """The catalog for the request's settings."""
    return get_catalog(settings)


CatalogDep = Annotated[Catalog, Depends(catalog_dep)]
"""The SQLite catalog."""


def current_user(
    settings: SettingsDep,
    authorization: Annotated[str | None, Header()] = None,
    x_user: Annotated[str | None, Header()] = None,
) -> str:
    """The caller: named by their bearer token when tokens are configured, else X-User."""
    tokens = settings.tokens()
    if not tokens:
        return (x_user or "anonymous").strip()[:128] or "anonymous"
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing 'Authorization: Bearer <token>' header")
    for known, user in tokens.items():
        if secrets.compare_digest(known.encode(), token.strip().encode()):
            return user
    raise Unauthorized("unknown API token")


UserDep = Annotated[str, Depends(current_user)]
"""The authenticated user name written to the audit log."""


def require_query(text: str, settings: Settings) -> str:
    """The stripped query, or InvalidInput saying why it cannot be used."""
    stripped = text.strip()
    if not stripped:
        raise InvalidInput("query is empty; ask something about the code")
    if len(stripped) > settings.max_query_chars:
        raise InvalidInput(
            f"query is {len(stripped)} characters; the limit is {settings.max_query_chars} "
            "(CODERAG_MAX_QUERY_CHARS)"
        )
    return stripped


def require_searchable(catalog: Catalog, repo: str) -> None:
    """NotFound for an unknown repository, Conflict while its first index is not finished."""
    state = catalog.get_repo(repo)
    rows = catalog.db.read("SELECT generation FROM repos WHERE name=?", (repo,))
    if rows and rows[0]["generation"] > 0:
        return
    if state.status == "error":
        raise Conflict(f"repository {repo!r} failed to index: {state.error}")
    raise Conflict(
        f"repository {repo!r} is still {state.status}; poll GET /repos/{repo} until it is ready"
    )
