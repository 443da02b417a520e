"""Repositories: register, inspect, reindex, delete. Indexing runs as queued jobs."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, FastAPI, Response

from coderag.deps import CatalogDep, SettingsDep, UserDep
from coderag.errors import Conflict, InvalidInput
from coderag.queue import enqueue
from coderag.schemas import RepoCreate, RepoOut
from coderag.store import get_catalog, get_vectors
from coderag_parser.health import router as health_router
from coderag_parser.symbols import router as symbols_router
from coderag_parser.webhooks import router as webhooks_router

INDEX_JOB = "coderag_parser.tasks.index_repo"
"""Job that (re)indexes a repository."""

router = APIRouter(tags=["repos"])


@asynccontextmanager
async def lifespan(_: FastAPI):
    """Resume repositories whose indexing a restart interrupted."""
    catalog = get_catalog()
    for repo in catalog.list_repos():
        if repo.status in ("queued", "indexing"):
            enqueue(INDEX_JOB, {"repo": repo.name})
    yield


@router.post("/repos", status_code=202)
def create_repo(body: RepoCreate, catalog: CatalogDep, _user: UserDep) -> dict:
    """Register a repository and start indexing it."""
    path = None
    if body.path:
        p = Path(body.path).expanduser()
        if not p.exists():
            raise InvalidInput(f"path {body.path!r} does not exist on the server")
        if not p.is_dir():
            raise InvalidInput(f"path {body.path!r} is not a directory")
        path = str(p.resolve())
    elif body.url and not body.url.startswith(("https://", "http://", "ssh://", "git@", "file://")):
        raise InvalidInput("url must be an https://, http://, ssh://, git@ or file:// git URL")
    repo = catalog.create_repo(body.name, path, body.url, body.branch)
    enqueue(INDEX_JOB, {"repo": repo.name})
    return {"name": repo.name, "status": repo.status}


@router.get("/repos")
def list_repos(catalog: CatalogDep, _user: UserDep) -> list[RepoOut]:
    """Every repository."""
    return catalog.list_repos()


@router.get("/repos/{name}")
def get_repo(name: str, catalog: CatalogDep, _user: UserDep) -> RepoOut:
    """One repository's state."""
    return catalog.get_repo(name)


@router.post("/repos/{name}/reindex", status_code=202)
def reindex(name: str, catalog: CatalogDep, _user: UserDep) -> dict:
    """Queue a reindex; only files whose content changed are parsed and embedded again."""
    repo = catalog.get_repo(name)
    if repo.status == "queued":
        raise Conflict(f"repository {name!r} is already queued")
    enqueue(INDEX_JOB, {"repo": name})
    return {"name": name, "status": repo.status}


@router.delete("/repos/{name}", status_code=204)
def delete_repo(name: str, catalog: CatalogDep, settings: SettingsDep, _user: UserDep) -> Response:
    """Remove a repository's vectors, units, files and clone."""
    catalog.get_repo(name)
    catalog.delete_repo(name)
    get_vectors(settings).drop(name)
    clone = settings.data_dir / "repos" / name
    if clone.is_dir():
        import shutil

        shutil.rmtree(clone, ignore_errors=True)
    return Response(status_code=204)


router.include_router(webhooks_router)
router.include_router(symbols_router)
router.include_router(health_router)
