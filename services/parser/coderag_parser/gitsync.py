"""Git facts: where a repository's files are (a local path or a clone under data/), its commit."""

from __future__ import annotations

import shutil
from pathlib import Path

import git

from coderag.errors import InvalidInput
from coderag.schemas import RepoOut
from coderag.settings import get_settings
from coderag_parser import gitrun

CLONES_DIR = "repos"
"""Clones of repositories registered by URL live in ``data_dir/repos/<name>``."""


def checkout(repo: RepoOut, data_dir: Path) -> Path:
    """The directory to index: the local path, or an up-to-date clone of the URL (cloned and
    fetched with ``gitrun``'s limits and safe configuration)."""
    if repo.path:
        root = Path(repo.path)
        if not root.is_dir():
            raise InvalidInput(f"path {repo.path!r} is not a directory")
        return root
    assert repo.url
    settings = get_settings()
    limits = {
        "kinds": [k.strip() for k in settings.url_schemes.split(",")],
        "timeout": settings.git_timeout,
        "max_bytes": settings.max_clone_bytes,
    }
    dest = data_dir / CLONES_DIR / repo.name
    if (dest / ".git").is_dir():
        gitrun.run_limited(["fetch", "--prune", "origin"], cwd=dest, watch=dest, **limits)
        clone = open_repo(dest)
        branch = repo.branch or clone.active_branch.name
        clone.git.checkout("-B", branch, f"origin/{branch}")
        clone.git.reset("--hard", f"origin/{branch}")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    branch = ["--branch", repo.branch] if repo.branch else []
    args = ["clone", "--no-recurse-submodules", *branch, "--", repo.url, str(dest)]
    try:
        gitrun.run_limited(args, cwd=dest.parent, watch=dest, **limits)
    except InvalidInput:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest


def open_repo(root: Path, search_parent_directories: bool = False) -> git.Repo:
    """A GitPython repository whose git processes run with ``gitrun.SAFE_CONFIG``."""
    repo = git.Repo(root, search_parent_directories=search_parent_directories)
    repo.git.update_environment(**gitrun.safe_env())
    return repo


def head_commit(root: Path) -> str | None:
    """The commit checked out at ``root``, or None when it is not a git work tree."""
    try:
        return open_repo(root).head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None


def changed_paths(root: Path, since: str) -> tuple[set[str], set[str]] | None:
    """Paths that may differ from commit ``since``: (changed between ``since`` and HEAD, renames'
    old and new sides included; dirty or untracked in the work tree). None when ``since`` is
    unknown to this repository (history rewritten), meaning a full walk is needed."""
    try:
        repo = open_repo(root)
        repo.commit(since)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError, git.BadName):
        return None
    changed: set[str] = set()
    out = repo.git.diff("--name-status", "-M", "-z", since, "HEAD")
    fields = [f for f in out.split("\0") if f]
    i = 0
    while i < len(fields):
        status = fields[i]
        width = 2 if status[0] in "RC" else 1
        changed.update(fields[i + 1 : i + 1 + width])
        i += 1 + width
    return changed, dirty_paths(repo)


def dirty_paths(repo: git.Repo) -> set[str]:
    """Files modified, added, deleted or untracked in the work tree (ignored ones excluded)."""
    out = repo.git.status("--porcelain=v1", "-z", "--untracked-files=all")
    dirty: set[str] = set()
    fields = [f for f in out.split("\0") if f]
    i = 0
    while i < len(fields):
        entry = fields[i]
        dirty.add(entry[3:])
        if entry[0] in "RC":  # the rename's source path follows as its own field
            i += 1
            dirty.add(fields[i])
        i += 1
    return dirty


def work_tree_dirty(root: Path) -> set[str]:
    """Dirty paths of a work tree, or none when it is not a git repository."""
    try:
        return dirty_paths(open_repo(root))
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return set()


def blame(root: Path, path: str) -> dict[int, tuple[str, str, str, int]]:
    """Line -> (commit, author, ISO date, recency) of the commit that last touched it, recency 0
    being the file's newest commit (dates tie within a second); {} if untracked."""
    try:
        repo = open_repo(root)
        out = repo.git.blame("--line-porcelain", "-w", "--", path)
        order = {sha: i for i, sha in enumerate(repo.git.log("--format=%H", "--", path).split())}
    except (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return {}
    lines: dict[int, tuple[str, str, str, int]] = {}
    sha = author = ""
    final = 0
    stamp = 0
    for line in out.splitlines():
        if line.startswith("\t"):
            lines[final] = (sha, author, _iso(stamp), order.get(sha, len(order)))
            continue
        head, _, rest = line.partition(" ")
        if len(head) == 40 and all(c in "0123456789abcdef" for c in head):
            sha, final = head, int(rest.split()[1])
        elif head == "author":
            author = rest
        elif head == "author-time":
            stamp = int(rest)
    return lines


def _iso(stamp: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def recent_commits(root: Path, days: int) -> dict[str, int]:
    """Commits per file over the last ``days`` days (renames followed to the current path)."""
    try:
        out = open_repo(root).git.log(
            f"--since={days}.days", "--name-only", "--format=", "--no-renames", "--", "."
        )
    except (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return {}
    counts: dict[str, int] = {}
    for line in out.splitlines():
        if line.strip():
            counts[line.strip()] = counts.get(line.strip(), 0) + 1
    return counts
