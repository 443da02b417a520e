"""Read-only lines of an indexed file: the web page's file view and the MCP ``read_range`` tool.
Only paths listed in the catalog are served, and only from inside the repository's own root.

A repository registered by URL is read from this host's clone; a host that runs no parser worker
has none, and the service able to clone (the parser, ``coderag_parser.trees``) registers with
``find_roots_with`` how to get one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from coderag.errors import InvalidInput, NotFound
from coderag.settings import Settings
from coderag.store import Catalog
from coderag.store.repos import Repo

CLONES_DIR = "repos"
"""Folder under the data directory holding clones of URL repositories."""

MAX_RANGE_LINES = 2000
"""Most lines one read returns."""


class FileRange(BaseModel):
    """Lines ``start_line``-``end_line`` of one indexed file."""

    repo: str
    file: str
    start_line: int
    end_line: int
    total_lines: int
    language: str
    lines: list[str]
    local_path: str | None = None


RootFinder = Callable[[Repo, Settings], Path]
"""Given a repository registered by URL whose clone this host lacks, a directory holding its tree
at the indexed commit."""

_finder: RootFinder | None = None


def find_roots_with(finder: RootFinder) -> None:
    """Get the tree of a URL repository this host holds no clone of from ``finder``."""
    global _finder
    _finder = finder


def repo_root(catalog: Catalog, settings: Settings, repo: str) -> Path:
    """The directory a repository was indexed from: its local path, this host's clone (a parser
    worker here keeps it; a ref always has a clone of its own, at the ref), or else the tree the
    registered finder gives."""
    state = catalog.get_repo(repo)
    if state.path and not state.ref_of:
        return Path(state.path)
    clone = settings.data_dir / CLONES_DIR / repo
    if _finder is None or (clone / ".git").is_dir() or not state.url:
        return clone
    return _finder(state, settings)


def read_range(
    catalog: Catalog,
    settings: Settings,
    repo: str,
    path: str,
    start: int = 1,
    end: int | None = None,
) -> FileRange:
    """Lines of an indexed file; NotFound for a path the index does not hold."""
    root = repo_root(catalog, settings, repo)
    row = catalog.indexed_file(repo, path)
    if row is None:
        raise NotFound(f"{path!r} is not an indexed file of {repo!r}; paths are as /search gives")
    if start < 1:
        raise InvalidInput(f"start={start}; lines are numbered from 1")
    if end is not None and end < start:
        raise InvalidInput(f"end={end} is before start={start}")
    full = (root / path).resolve()
    # The catalog only holds walked paths, but a symlink swapped in since must not escape.
    if not full.is_relative_to(root.resolve()) or not full.is_file():
        raise NotFound(f"{path!r} is no longer a file inside {repo!r}; reindex it")
    text = full.read_text(encoding="utf-8", errors="replace").splitlines()
    total = len(text)
    if start > max(total, 1):
        raise InvalidInput(f"start={start} is past the file's {total} lines")
    last = min(total, end if end is not None else total, start + MAX_RANGE_LINES - 1)
    state = catalog.get_repo(repo)
    return FileRange(
        repo=repo,
        file=path,
        start_line=start,
        end_line=max(last, start),
        total_lines=total,
        language=row.language,
        lines=text[start - 1 : last],
        local_path=str(root / path) if state.path else None,
    )
