"""/openapi.json and /docs behind the same tokens as the API (FastAPI's own are turned off)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from coderag.deps import UserDep

router = APIRouter(include_in_schema=False)


@router.get("/openapi.json")
def openapi(request: Request, _user: UserDep) -> JSONResponse:
    """The OpenAPI schema of this app."""
    return JSONResponse(request.app.openapi())


@router.get("/docs")
def swagger(request: Request, _user: UserDep) -> HTMLResponse:
    """The interactive API page (its browser fetches /openapi.json with no token: with tokens
    configured, read the schema with curl and the bearer header instead)."""
    return get_swagger_ui_html(openapi_url="/openapi.json", title=request.app.title)
