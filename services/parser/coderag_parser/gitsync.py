"""Git facts: where a repository's files are (a local path or a clone under data/), its commit."""

from __future__ import annotations

from pathlib import Path

import git
from coderag.errors import InvalidInput
from coderag.schemas import RepoOut

CLONES_DIR = "repos"
"""Clones of repositories registered by URL live in ``data_dir/repos/<name>``."""


def checkout(repo: RepoOut, data_dir: Path) -> Path:
    """The directory to index: the local path, or an up-to-date clone of the URL."""
    if repo.path:
        root = Path(repo.path)
        if not root.is_dir():
            raise InvalidInput(f"path {repo.path!r} is not a directory")
        return root
    assert repo.url
    dest = data_dir / CLONES_DIR / repo.name
    if (dest / ".git").is_dir():
        clone = git.Repo(dest)
        clone.remotes.origin.fetch(prune=True)
        branch = repo.branch or clone.active_branch.name
        clone.git.checkout("-B", branch, f"origin/{branch}")
        clone.git.reset("--hard", f"origin/{branch}")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    kwargs = {"branch": repo.branch} if repo.branch else {}
    git.Repo.clone_from(repo.url, dest, **kwargs)
    return dest


def head_commit(root: Path) -> str | None:
    """The commit checked out at ``root``, or None when it is not a git work tree."""
    try:
        return git.Repo(root, search_parent_directories=False).head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None
