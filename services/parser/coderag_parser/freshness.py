"""How fresh a repository's index is (issue 43): the commit it was built from and, when the
repository's HEAD has moved since, how many commits the index lacks ("3 commits behind HEAD").

Every answer carries it, so it must be cheap: HEAD is resolved by one ``git rev-parse`` and the
count (``git rev-list --count``, which walks the commits in between) is cached by the pair of
commits, so a HEAD that did not move costs no walk. Git runs only on ``coderag.gitsafe``'s views,
never with the repository's own config. A repository registered by URL is not fetched per
question: its HEAD is unknown here, and the answer says only which commit it was built from."""

from __future__ import annotations

import re
import subprocess
import threading
from pathlib import Path

from coderag import gitsafe
from coderag.schemas import Freshness
from coderag.store import Catalog
from coderag.store.repos import Repo

CACHE_SIZE = 1024
"""Counts remembered, by (git directory, indexed commit, HEAD commit)."""

GIT_TIMEOUT_S = 20.0
"""Longest a HEAD lookup or a count may take; past it the distance is unknown."""

_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")

_counts: dict[tuple[str, str, str], int | None] = {}
_lock = threading.Lock()


def source(catalog: Catalog, repo: Repo) -> tuple[Path, str] | None:
    """Where the newest commit of what was indexed is read, and the revision naming it: a
    repository registered by path, its folder's HEAD; a ref of one, that branch or tag in the
    folder; None for a repository registered by URL (its remote is not asked per question)."""
    if repo.ref_of:
        parent = catalog.get_repo(repo.ref_of)
        if parent.path and repo.branch:
            return Path(parent.path), repo.branch
        return None
    if repo.path:
        return Path(repo.path), "HEAD"
    return None


def _git(root: Path, args: list[str]) -> str | None:
    """What ``git args`` prints on the view of ``root``, stripped; None when it fails."""
    try:
        done = gitsafe.run(root, args, timeout=GIT_TIMEOUT_S)
    except (gitsafe.NotARepository, gitsafe.Refused, subprocess.TimeoutExpired, OSError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def resolve(root: Path, rev: str) -> str | None:
    """The commit ``rev`` names in the repository at ``root``, or None."""
    out = _git(root, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"])
    return out if out and _SHA.match(out) else None


def behind(root: Path, indexed: str, head: str) -> int | None:
    """Commits reachable from ``head`` and not from ``indexed`` (cached by the pair); None when
    the indexed commit is no longer in the repository (its history was rewritten)."""
    if indexed == head:
        return 0
    if not _SHA.match(indexed):  # a row's value is not handed to git unchecked
        return None
    key = (str(root), indexed, head)
    with _lock:
        if key in _counts:
            return _counts[key]
    out = _git(root, ["rev-list", "--count", f"{indexed}..{head}", "--"])
    count = int(out) if out and out.isdigit() else None
    with _lock:
        if len(_counts) >= CACHE_SIZE:
            _counts.pop(next(iter(_counts)))  # the oldest entry: a HEAD long since moved on
        _counts[key] = count
    return count


def _plural(n: int) -> str:
    return f"{n} commit{'' if n == 1 else 's'}"


def note(indexed: str | None, head: str | None, commits: int | None) -> str:
    """The freshness in words, for answers and pages."""
    if indexed is None:
        return ""
    said = f"indexed at commit {indexed[:12]}"
    if head is None:
        return said
    if commits == 0:
        return f"{said} (HEAD)"
    if commits is None:
        return f"{said}; HEAD has moved to {head[:12]}, which does not contain it: reindex"
    return f"{said}, {_plural(commits)} behind HEAD ({head[:12]}): reindex for the newest code"


def of(catalog: Catalog, name: str) -> Freshness:
    """The freshness of the index of repository (or ref key) ``name``; NotFound when unknown."""
    repo = catalog.get_repo(name)
    indexed = repo.commit
    where = source(catalog, repo) if indexed else None
    head = resolve(*where) if where else None
    commits = behind(where[0], indexed, head) if where and indexed and head else None
    return Freshness(
        indexed_commit=indexed,
        head_commit=head,
        commits_behind=commits,
        note=note(indexed, head, commits),
    )
