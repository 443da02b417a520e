"""A repository's other branches and tags: register, list, inspect and delete them.

Each ref is indexed under a key of its own (``coderag.store.refs``) and searched with ``ref``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import git
from fastapi import APIRouter, Response
from pydantic import BaseModel

from coderag.deps import AdminDep, CatalogDep, GitDetailDep, RepoNameDep, SettingsDep
from coderag.errors import Conflict, InvalidInput, NotFound, Unavailable
from coderag.jobs import IndexRepo
from coderag.queue import enqueue
from coderag.responses import errors
from coderag.schemas import MAX_REFS, RefCreate, RefOut, RepoStatus
from coderag.settings import Settings
from coderag.store import Catalog, get_vectors, refs
from coderag.store.repos import Repo
from coderag_parser import gitsync, origins, states
from coderag_parser.gitsync import CLONES_DIR, open_repo
from coderag_parser.trees import TREES_DIR

router = APIRouter(tags=["repos"])


class RefAccepted(BaseModel):
    """A ref was registered and its index queued."""

    name: str
    ref: str
    status: RepoStatus


def check_refs(wanted: list[str], branch: str | None, path: str | None) -> list[str]:
    """The refs to register beside the repository's own branch (``branch``, else the one checked
    out at ``path``), each a valid name (InvalidInput otherwise) and, for a local repository,
    one it has (NotFound otherwise; a URL's refs are checked when cloned). A repository
    registered by a subdirectory of a git work tree has no refs (InvalidInput)."""
    if len(wanted) > MAX_REFS:
        raise InvalidInput(f"{len(wanted)} refs given; at most {MAX_REFS}")
    names = [origins.check_branch(r) for r in dict.fromkeys(wanted)]
    if path and names and (top := gitsync.enclosing_repository(Path(path))) is not None:
        raise InvalidInput(
            f"path {path!r} is a subdirectory of the git repository at {top}; a ref is indexed "
            f"from a clone of a whole repository, so register {top} to index refs"
        )
    own = branch or (gitsync.checked_out_branch(Path(path)) if path else None)
    out = [r for r in names if r != own]
    if path:
        for ref in out:
            _check_local_ref(Path(path), ref)
    return out


def own_branch(repo: Repo, settings: Settings) -> str | None:
    """The branch a repository indexes: the one it was registered with, else the one checked
    out at its path or in this host's clone of its URL (None before it was cloned here)."""
    if repo.branch:
        return repo.branch
    root = Path(repo.path) if repo.path else settings.data_dir / CLONES_DIR / repo.name
    return gitsync.checked_out_branch(root)


def _check_local_ref(root: Path, ref: str) -> None:
    """NotFound unless the local repository at ``root`` has a branch or tag ``ref``."""
    try:
        local = open_repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        raise NotFound(f"{root} is not a git repository, so it has no ref {ref!r}") from exc
    for target in (f"refs/heads/{ref}", f"refs/tags/{ref}", f"refs/remotes/origin/{ref}"):
        try:
            local.git.rev_parse("--verify", "--quiet", f"{target}^{{commit}}")
            return
        except git.GitCommandError:
            continue
    raise NotFound(f"{root} has no branch or tag named {ref!r}")


def remove(catalog: Catalog, settings: Settings, key: str) -> None:
    """Remove a repository or ref's vectors, rows and this host's clones; a repository's refs
    go with it (a parser worker on another host re-clones a name registered again from another
    URL: ``gitsync.checkout``)."""
    keys = [key] if refs.is_ref_key(key) else [r.name for r in refs.of(catalog, key)] + [key]
    vectors = get_vectors(settings)
    for k in keys:
        vectors.drop(k)  # first: with Chroma down this is a 503 and nothing is lost
        catalog.delete_repo(k)
        for folder in (CLONES_DIR, TREES_DIR):  # the parser's clone, a reader's clone
            clone = settings.data_dir / folder / k
            if clone.is_dir():
                shutil.rmtree(clone, ignore_errors=True)


@router.post("/repos/{name}/refs", status_code=202, responses=errors(400, 403, 404, 409, 503))
def add_ref(
    name: RepoNameDep, body: RefCreate, catalog: CatalogDep, settings: SettingsDep, _user: AdminDep
) -> RefAccepted:
    """Index another branch or tag of a repository (admin): forked from the repository's
    complete index, so only the files that differ are parsed and embedded."""
    repo = catalog.get_repo(name)
    if repo.ref_of:
        raise InvalidInput(f"{name!r} is not a repository")
    own = own_branch(repo, settings)
    if body.ref == own:
        how = "registered with it" if repo.branch else "checked out where it is indexed from"
        raise Conflict(
            f"{body.ref!r} is the branch repository {name!r} indexes ({how}); search it without ref"
        )
    (ref,) = check_refs([body.ref], own, repo.path)
    if len(refs.of(catalog, name)) >= MAX_REFS:
        raise InvalidInput(f"repository {name!r} already indexes {MAX_REFS} refs; delete one")
    state = refs.add(catalog, name, ref)
    try:
        # read after the insert: a chain completing now either sees the new row and queues
        # it, or completed before this read, which then queues it
        if not refs.indexing(catalog.get_repo(name)):
            enqueue(IndexRepo(repo=state.name))
    except Unavailable:
        remove(catalog, settings, state.name)
        raise
    return RefAccepted(name=name, ref=ref, status=state.status)


@router.get("/repos/{name}/refs", responses=errors(400, 404))
def list_refs(name: RepoNameDep, catalog: CatalogDep, detail: GitDetailDep) -> list[RefOut]:
    """The branches and tags indexed beside the repository's own branch."""
    catalog.get_repo(name)
    return [states.ref_out(r, git_detail=detail) for r in refs.of(catalog, name)]


@router.get("/repos/{name}/refs/{ref:path}", responses=errors(400, 404))
def get_ref(name: RepoNameDep, ref: str, catalog: CatalogDep, detail: GitDetailDep) -> RefOut:
    """One ref's indexing state."""
    key = refs.resolve(catalog, name, ref)
    if key == name:
        raise InvalidInput(f"{ref!r} is the branch repository {name!r} indexes: GET /repos/{name}")
    return states.ref_out(catalog.get_repo(key), git_detail=detail)


@router.delete(
    "/repos/{name}/refs/{ref:path}", status_code=204, responses=errors(400, 403, 404, 503)
)
def delete_ref(
    name: RepoNameDep, ref: str, catalog: CatalogDep, settings: SettingsDep, _user: AdminDep
) -> Response:
    """Remove one ref's vectors, units, files and clone (admin); the repository stays."""
    key = refs.resolve(catalog, name, ref)
    if key == name:
        raise InvalidInput(
            f"{ref!r} is the branch repository {name!r} indexes: DELETE /repos/{name}"
        )
    remove(catalog, settings, key)
    return Response(status_code=204)
