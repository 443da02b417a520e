"""Trees for readers on a host that runs no parser worker: the API's file view, line history and
health report read a repository registered by URL from a clone of this host's own, cloned on
first use and checked out at the indexed commit.

Parser workers keep their clones under ``data_dir/repos`` and move them as they index; readers
never touch those (a checkout under a parse would change the files it reads). On a host without
one, ``data_dir/trees/<name>`` is cloned from the registered URL with ``gitrun``'s limits and
safe configuration, fetched only when the indexed commit is not in it, and detached at that
commit, so the lines a reader serves are those the index and its citations were made from.
"""

from __future__ import annotations

import fcntl
import shutil
import threading
from pathlib import Path

import git

from coderag import file_ranges
from coderag.errors import NotFound
from coderag.settings import Settings
from coderag.store import Catalog
from coderag.store.repos import Repo
from coderag_parser import gitsync, origins

TREES_DIR = "trees"
"""Readers' clones live in ``data_dir/trees/<name>``, apart from the parser workers' clones."""

_locks: dict[str, threading.Lock] = {}
_locks_lock = threading.Lock()


def _lock(name: str) -> threading.Lock:
    with _locks_lock:
        return _locks.setdefault(name, threading.Lock())


def reader_tree(repo: Repo, settings: Settings) -> Path:
    """This host's reader clone of a URL repository, at its indexed commit (cloned or fetched
    as needed); NotFound when the remote no longer holds that commit."""
    assert repo.url
    # the row's URL is checked against this host's allow-lists again, not trusted as stored
    origins.check_url(repo.url, settings)
    dest = settings.data_dir / TREES_DIR / repo.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    # threads of this process wait on the lock, other processes on this host (uvicorn
    # workers, the CLI) on the file lock: one clone or checkout at a time per repository
    with _lock(repo.name), (dest.parent / f".{repo.name}.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        _sync(repo, dest)
    return dest


def _sync(repo: Repo, dest: Path) -> None:
    """Clone ``dest`` from the repository's URL if it lacks one, then detach it at the indexed
    commit, fetching first when the commit is not in it."""
    assert repo.url
    limits = gitsync.clone_limits()
    if (dest / ".git").is_dir() and not gitsync.same_origin(dest, repo.url):
        shutil.rmtree(dest)  # a repository of this name deleted and registered again
    if not (dest / ".git").is_dir():
        shutil.rmtree(dest, ignore_errors=True)  # a clone stopped half-way
        gitsync.clone_into(dest, repo.url, ["--no-recurse-submodules"], limits)
    clone = gitsync.open_clone(dest)
    wanted = repo.commit or "origin/HEAD"
    if _has(clone, wanted) and _head(clone) == clone.commit(wanted).hexsha:
        return
    if not _has(clone, wanted):
        gitsync.fetch(dest, repo.url, limits)
    try:
        clone.git.checkout("--detach", "--force", wanted)
    except git.GitCommandError as exc:
        raise NotFound(
            f"{repo.url} no longer holds the indexed commit {wanted}; reindex {repo.name!r}"
        ) from exc


def _has(clone: git.Repo, rev: str) -> bool:
    try:
        clone.commit(rev)
    except (git.BadName, ValueError):
        return False
    return True


def _head(clone: git.Repo) -> str | None:
    try:
        return clone.head.commit.hexsha
    except ValueError:  # an empty repository: nothing checked out
        return None


def root(catalog: Catalog, settings: Settings, name: str) -> Path:
    """The directory a reader on this host reads a repository from (``file_ranges.repo_root``,
    with this module's finder registered)."""
    return file_ranges.repo_root(catalog, settings, name)


file_ranges.find_roots_with(reader_tree)
