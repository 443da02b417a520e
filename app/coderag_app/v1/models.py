"""GET /v1/models: the repositories and refs the caller may ask, as OpenAI models."""

from __future__ import annotations

from fastapi import APIRouter

from coderag.deps import CatalogDep, UserDep
from coderag_app.v1 import serving
from coderag_app.v1.errors import responses
from coderag_app.v1.schemas import ModelList

router = APIRouter(tags=["openai"])


@router.get("/v1/models", responses=responses(503))
def list_models(catalog: CatalogDep, _user: UserDep) -> ModelList:
    """Every repository and ref the caller may read (``CODERAG_GRANTS``), as ``GET /repos``
    lists them, as ``coderag/<name>[@<ref>]`` with its index state."""
    return serving.models(catalog.list_repos())
