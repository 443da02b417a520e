"""Repositories: register, inspect, reindex, delete. Indexing runs as queued jobs."""

from __future__ import annotations

import contextlib
import threading
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Response
from pydantic import BaseModel

from coderag import redact
from coderag.deps import (
    AdminDep,
    CatalogDep,
    GitDetailDep,
    RepoNameDep,
    SettingsDep,
    valid_name,
)
from coderag.errors import Conflict, Unavailable
from coderag.jobs import IndexRepo
from coderag.queue import enqueue, heal
from coderag.responses import errors
from coderag.schemas import RepoCreate, RepoOut, RepoStatus
from coderag.settings import get_settings
from coderag.store import get_catalog, refs
from coderag_parser import branches, origins, states
from coderag_parser.health import router as health_router
from coderag_parser.line_history import router as history_router
from coderag_parser.navigation import router as navigation_router
from coderag_parser.webhooks import router as webhooks_router

router = APIRouter(tags=["repos"])


class RepoAccepted(BaseModel):
    """A registration or reindex was queued."""

    name: str
    status: RepoStatus


@asynccontextmanager
async def lifespan(_: FastAPI):
    """Resume repositories whose indexing a restart interrupted (Redis down: the workers heal
    them once it is back); load the secret detectors beside it."""
    threading.Thread(target=redact.warm, name="coderag-redact-warm", daemon=True).start()
    with contextlib.suppress(Unavailable):
        heal(get_catalog(), get_settings(), startup=True)
    yield


@router.post("/repos", status_code=202, responses=errors(400, 403, 404, 409, 503))
def create_repo(
    body: RepoCreate, catalog: CatalogDep, settings: SettingsDep, _user: AdminDep
) -> RepoAccepted:
    """Register a repository and start indexing it (admin)."""
    name = valid_name(body.name)
    path = origins.check_path(body.path, settings) if body.path else None
    url = origins.check_url(body.url, settings) if body.url else None
    branch = origins.check_branch(body.branch) if body.branch is not None else None
    others = branches.check_refs(body.refs, branch, path)
    repo = catalog.create_repo(name, path, url, branch)
    try:
        for ref in others:  # queued when the repository's index completes, to fork from it
            refs.add(catalog, name, ref)
        enqueue(IndexRepo(repo=repo.name))
    except Unavailable:
        # nothing half-registered: the same POST works later
        branches.remove(catalog, settings, name)
        raise
    return RepoAccepted(name=repo.name, status=repo.status)


@router.get("/repos")
def list_repos(catalog: CatalogDep, detail: GitDetailDep) -> list[RepoOut]:
    """Every repository, each with its refs."""
    return states.listed(catalog.list_repos(), git_detail=detail)


@router.get("/repos/{name}", responses=errors(400, 404))
def get_repo(name: RepoNameDep, catalog: CatalogDep, detail: GitDetailDep) -> RepoOut:
    """One repository's state, with its refs (to an admin: with git's own words on a failure)."""
    return states.repo_out(catalog.get_repo(name), refs.of(catalog, name), git_detail=detail)


@router.post("/repos/{name}/reindex", status_code=202, responses=errors(400, 403, 404, 409, 503))
def reindex(
    name: RepoNameDep, catalog: CatalogDep, _user: AdminDep, ref: str | None = None
) -> RepoAccepted:
    """Queue a reindex (admin) of the repository or, with ``ref``, of that branch or tag; only
    files whose content changed are parsed and embedded again."""
    key = refs.resolve(catalog, name, ref)
    repo = catalog.get_repo(key)
    if repo.status == "queued":
        raise Conflict(f"repository {name!r} is already queued")
    enqueue(IndexRepo(repo=key))
    return RepoAccepted(name=name, status=repo.status)


@router.delete("/repos/{name}", status_code=204, responses=errors(400, 403, 404, 503))
def delete_repo(
    name: RepoNameDep, catalog: CatalogDep, settings: SettingsDep, _user: AdminDep
) -> Response:
    """Remove a repository's vectors, units, files and clone, and those of its refs (admin)."""
    catalog.get_repo(name)
    branches.remove(catalog, settings, name)
    return Response(status_code=204)


router.include_router(branches.router)
router.include_router(webhooks_router)
router.include_router(navigation_router)
router.include_router(history_router)
router.include_router(health_router)
