"""A repository's and a ref's state as the API shows them (``RepoOut``, ``RefOut``), from the
store's records."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from coderag.schemas import RefOut, RepoOut, StageProgress
from coderag.store import refs
from coderag.store.repos import Repo


def _state(repo: Repo, git_detail: bool) -> dict[str, Any]:
    """The fields a repository's state and a ref's share (git's own words in an error only with
    ``git_detail``)."""
    return {
        "status": repo.status,
        "commit": repo.commit,
        "files": repo.files,
        "units": repo.units,
        "skipped": repo.skipped,
        "indexed_at": repo.indexed_at,
        "error": repo.error,
        "error_detail": repo.error_detail if git_detail else None,
        "progress": repo.progress,
        "complete": repo.complete,
        "stages": {s: StageProgress(done=p.done, total=p.total) for s, p in repo.stages.items()},
        "eta_s": repo.eta_s,
        "searchable_at": repo.searchable_at,
    }


def ref_out(ref: Repo, *, git_detail: bool = False) -> RefOut:
    """A ref's state as its repository lists it (``git_detail``: with git's own words)."""
    return RefOut(ref=ref.branch or "", **_state(ref, git_detail))


def repo_out(repo: Repo, its_refs: Iterable[Repo] = (), *, git_detail: bool = False) -> RepoOut:
    """A repository's state, with ``its_refs`` listed (``git_detail``: with git's own
    words on a failure)."""
    return RepoOut(
        name=repo.name,
        path=repo.path,
        url=repo.url,
        branch=repo.branch,
        skipped_by_reason=repo.skipped_by_reason,
        refs=[ref_out(r, git_detail=git_detail) for r in its_refs],
        **_state(repo, git_detail),
    )


def listed(rows: list[Repo], *, git_detail: bool = False) -> list[RepoOut]:
    """The repositories among ``rows`` (refs included, as one read gives them), each with its
    refs listed by ref."""
    return [
        repo_out(repo, its_refs, git_detail=git_detail) for repo, its_refs in refs.grouped(rows)
    ]
