"""Typed FastAPI dependencies shared by every router; tests override ``get_settings``."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Header, Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from coderag.auth import Principal
from coderag.errors import Conflict, Forbidden, InvalidInput, Unauthorized
from coderag.schemas import REPO_NAME_PATTERN, check_repo_name
from coderag.settings import Settings, get_settings
from coderag.store import Catalog, get_catalog, refs
from coderag.store.repos import Repo

SettingsDep = Annotated[Settings, Depends(get_settings)]
"""The settings of this request."""


def catalog_dep(settings: SettingsDep) -> Catalog:
    """The catalog for the request's settings."""
    return get_catalog(settings)


CatalogDep = Annotated[Catalog, Depends(catalog_dep)]
"""The SQLite catalog."""


def current_principal(
    settings: SettingsDep,
    authorization: Annotated[str | None, Header()] = None,
    x_user: Annotated[str | None, Header()] = None,
) -> Principal:
    """The caller and role: named by their bearer token when tokens are configured, else the
    X-User header (or ``anonymous``) with every role, as on a single-user laptop."""
    tokens = settings.principals()
    if not tokens:
        return Principal((x_user or "anonymous").strip()[:128] or "anonymous", "admin")
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing 'Authorization: Bearer <token>' header")
    for known, principal in tokens.items():
        if secrets.compare_digest(known.encode(), token.strip().encode()):
            return principal
    raise Unauthorized("unknown API token")


PrincipalDep = Annotated[Principal, Depends(current_principal)]
"""The authenticated caller with their role."""


def current_user(principal: PrincipalDep) -> str:
    """The caller's user name, written to the audit log."""
    return principal.user


def require_admin(principal: PrincipalDep) -> str:
    """The caller's user name if they hold the admin role, else Forbidden."""
    if not principal.may("admin"):
        raise Forbidden(
            f"user {principal.user!r} has the {principal.role!r} role; this needs an admin "
            "token (CODERAG_API_TOKENS entry user:token:admin)"
        )
    return principal.user


def shows_git_detail(principal: PrincipalDep, settings: SettingsDep) -> bool:
    """Whether this caller is shown git's own output on a failed index: an admin who gave an
    admin token. Without tokens anyone who reaches the port is an admin, so nobody is: the
    detail stays in the server's log (and ``coderag status``)."""
    return bool(settings.principals()) and principal.may("admin")


GitDetailDep = Annotated[bool, Depends(shows_git_detail)]
"""Whether the caller may read git's own words in a repository's error."""

UserDep = Annotated[str, Depends(current_user)]
"""The authenticated user name written to the audit log (any role)."""

AdminDep = Annotated[str, Depends(require_admin)]
"""The authenticated user name of an admin."""


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


def require_searchable(state: Repo) -> None:
    """Conflict while a repository's (or ref's) first index is not finished."""
    if state.generation > 0:
        return
    repo = state.name
    # a ref's key is no name the API takes: point at the ref's own route
    what, poll = f"repository {repo!r}", f"GET /repos/{repo}"
    if state.ref_of:
        what = f"ref {state.branch!r} of {state.ref_of!r}"
        poll = f"GET /repos/{state.ref_of}/refs/{state.branch}"
    if state.status == "error":
        raise Conflict(f"{what} failed to index: {state.error}")
    raise Conflict(f"{what} is still {state.status}; poll {poll} until it is ready")


def valid_name(name: str) -> str:
    """``name`` if it is a valid repository name, else InvalidInput saying what is allowed."""
    try:
        return check_repo_name(name)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc


def repo_name_param(
    name: Annotated[
        str,
        Path(
            description="Repository name (400 unless it is a valid one).",
            json_schema_extra={"pattern": REPO_NAME_PATTERN},
        ),
    ],
) -> str:
    """The ``{name}`` path parameter, checked like a registered name."""
    return valid_name(name)


RepoNameDep = Annotated[str, Depends(repo_name_param)]
"""A repository name from the URL path, 400 when it could never be registered."""


def repo_key_param(
    name: RepoNameDep,
    catalog: CatalogDep,
    ref: Annotated[
        str | None,
        Query(
            max_length=255,
            description="A branch or tag registered for the repository; default: its own branch.",
        ),
    ] = None,
) -> str:
    """The repository, or its ref named by the ``ref`` query parameter (404 if not registered)."""
    return refs.resolve(catalog, name, ref)


RepoKeyDep = Annotated[str, Depends(repo_key_param)]
"""What a read of ``/repos/{name}/...`` reads: the repository or the ``ref`` asked for."""


def known_query(request: Request) -> None:
    """Refuse a query parameter the route does not take, naming the ones it does: a misspelt
    filter silently ignored returned the first symbols of the alphabet as if they matched
    (``/symbols?prefix=`` for ``?q=``: issue 43's fourth trial)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    taken = sorted(_query_names(route.dependant))
    unknown = sorted(set(request.query_params) - set(taken))
    if unknown:
        raise InvalidInput(
            f"{route.path} takes no query parameter {', '.join(map(repr, unknown))}; "
            f"it takes {', '.join(taken) or 'none'}"
        )


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters a route or dependency takes, its sub-dependencies' included."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names
