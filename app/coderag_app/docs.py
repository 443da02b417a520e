"""/openapi.json and /docs behind the same tokens as the API (FastAPI's own are turned off)."""

from __future__ import annotations

import copy
from typing import Any

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from coderag.deps import SettingsDep, UserDep
from coderag.settings import Settings

router = APIRouter(include_in_schema=False)


def with_limits(schema: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The schema with the limits that are settings filled in (query length, top_k)."""
    out = copy.deepcopy(schema)
    models = out.get("components", {}).get("schemas", {})
    for name in ("SearchRequest", "AskRequest"):
        props = models.get(name, {}).get("properties", {})
        if "query" in props:
            props["query"]["maxLength"] = settings.max_query_chars
        if "top_k" in props:
            props["top_k"]["maximum"] = settings.max_top_k
    return out


@router.get("/openapi.json")
def openapi(request: Request, settings: SettingsDep, _user: UserDep) -> JSONResponse:
    """The OpenAPI schema of this app, with this server's limits."""
    return JSONResponse(with_limits(request.app.openapi(), settings))


@router.get("/docs")
def swagger(request: Request, _user: UserDep) -> HTMLResponse:
    """The interactive API page (its browser fetches /openapi.json with no token: with tokens
    configured, read the schema with curl and the bearer header instead)."""
    return get_swagger_ui_html(openapi_url="/openapi.json", title=request.app.title)
