"""Git facts: where a repository's files are (a local path or a clone under data/), its commit."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import git

from coderag import gitsafe
from coderag.errors import InvalidInput
from coderag.settings import get_settings
from coderag.store.repos import Repo
from coderag_parser import gitrun

CLONES_DIR = "repos"
"""Clones of repositories registered by URL live in ``data_dir/repos/<name>``."""


def checkout(repo: Repo, data_dir: Path) -> Path:
    """The directory to index: the local path, or an up-to-date clone of the URL (cloned and
    fetched with ``gitrun``'s limits and safe configuration), or a ref's clone at the ref."""
    if repo.path:
        root = Path(repo.path)
        if not root.is_dir():
            raise InvalidInput(f"path {repo.path!r} is not a directory")
        if repo.ref_of:
            return _ref_checkout(repo, root, data_dir)
        return root
    assert repo.url
    if repo.ref_of:
        return _ref_checkout(repo, repo.url, data_dir)
    limits = clone_limits()
    dest = data_dir / CLONES_DIR / repo.name
    if (dest / ".git").is_dir() and not same_origin(dest, repo.url):
        # a clone left by a repository of this name deleted since: the API's DELETE removes
        # only its own host's clone, never those of parser workers on other hosts
        shutil.rmtree(dest)
    if (dest / ".git").is_dir():
        fetch(dest, repo.url, limits)
        clone = open_clone(dest)
        branch = repo.branch or clone.active_branch.name
        clone.git.checkout("-B", branch, f"origin/{branch}")
        clone.git.reset("--hard", f"origin/{branch}")
        return dest
    branch_args = ["--branch", repo.branch] if repo.branch else []
    clone_into(dest, repo.url, ["--no-recurse-submodules", *branch_args], limits)
    return dest


def clone_into(dest: Path, source: str, options: list[str], limits: dict[str, Any]) -> None:
    """``git clone options -- source dest`` with ``gitrun``'s limits; a local ``source`` is
    read through its view (``gitsafe.upload_source``) and recorded as ``source`` all the same,
    and with ``--shared`` the clone borrows the repository's own objects. A failed clone
    leaves nothing."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    served = gitsafe.upload_source(source, as_path="--shared" in options)
    try:
        args = ["clone", *options, "--", served, str(dest)]
        gitrun.run_limited(args, cwd=dest.parent, watch=dest, **limits)
        if served != source:
            clone = open_clone(dest)
            clone.git.remote("set-url", "origin", source)
            if "--shared" in options:
                # the view is this process's: borrow from what it borrows from, which lasts
                local = gitsafe.local_source(source)
                assert local is not None
                borrowed = gitsafe.view(local).objects
                (dest / ".git" / "objects" / "info" / "alternates").write_text(f"{borrowed}\n")
    except (InvalidInput, git.GitCommandError, gitsafe.NotARepository):
        shutil.rmtree(dest, ignore_errors=True)
        raise


def fetch(dest: Path, source: str, limits: dict[str, Any], tags: bool = False) -> None:
    """Fetch ``source``'s branches into ``dest``'s ``origin/*`` (and its tags with ``tags``),
    pruning what is gone; a local ``source`` is read through its view."""
    served = gitsafe.upload_source(source)
    extra = ["--tags", "--force"] if tags else []
    if served == source:
        args = ["fetch", "--prune", *extra, "origin"]
    else:
        args = ["fetch", "--prune", *extra, served, "+refs/heads/*:refs/remotes/origin/*"]
    gitrun.run_limited(args, cwd=dest, watch=dest, **limits)


def prune(data_dir: Path, registered: set[str]) -> list[str]:
    """Remove this host's clones of names no longer registered, and say which: the API's DELETE
    removes the clones of its own host only, so a parser worker on another host tidies its own
    folder before each parse."""
    root = data_dir / CLONES_DIR
    if not root.is_dir():
        return []
    gone = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name not in registered)
    for name in gone:
        shutil.rmtree(root / name, ignore_errors=True)
    return gone


def clone_limits() -> dict[str, Any]:
    """``gitrun.run_limited``'s keyword arguments under the settings: the transports
    ``CODERAG_URL_SCHEMES`` allows, ``CODERAG_GIT_TIMEOUT`` and ``CODERAG_MAX_CLONE_BYTES``."""
    settings = get_settings()
    return {
        "kinds": [k.strip() for k in settings.url_schemes.split(",")],
        "timeout": settings.git_timeout,
        "max_bytes": settings.max_clone_bytes,
    }


def same_origin(clone: Path, url: str) -> bool:
    """Whether the clone at ``clone`` was made from ``url`` (its ``origin`` remote)."""
    try:
        return open_clone(clone).remotes.origin.url == url
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, AttributeError, ValueError):
        return False


def _ref_checkout(repo: Repo, source: Path | str, data_dir: Path) -> Path:
    """A ref's own clone of ``source`` (the repository's local path or URL), fetched and checked
    out detached at the ref: the branch of that name, else the tag; InvalidInput when the source
    has neither."""
    dest = data_dir / CLONES_DIR / repo.name
    ref = repo.branch or ""
    limits, shared = clone_limits(), []
    if isinstance(source, Path):
        # a local repository: its objects are borrowed (alternates), not copied, and the URL
        # rules, which are about remotes, do not apply
        limits, shared, source = {**limits, "kinds": ["file"]}, ["--shared"], str(source)
    if (dest / ".git").is_dir() and not same_origin(dest, source):
        shutil.rmtree(dest)  # left by a ref of a repository of this name deleted since
    if not (dest / ".git").is_dir():
        options = ["--no-recurse-submodules", "--no-checkout", *shared]
        clone_into(dest, source, options, limits)
    fetch(dest, source, limits, tags=True)
    clone = open_clone(dest)
    for target in (f"refs/remotes/origin/{ref}", f"refs/tags/{ref}"):
        try:
            clone.git.rev_parse("--verify", "--quiet", f"{target}^{{commit}}")
        except git.GitCommandError:
            continue
        clone.git.checkout("--detach", "--force", target)
        clone.git.clean("-fdx")
        return dest
    raise InvalidInput(f"{repo.ref_of!r} has no branch or tag named {ref!r}")


def open_clone(dest: Path) -> git.Repo:
    """A clone the product made (``data_dir/repos`` or ``data_dir/trees``), opened in place to
    move it: git wrote its config from a remote, which cannot choose any of it."""
    clone = git.Repo(dest)
    clone.git.update_environment(**gitsafe.safe_env())
    return clone


def open_repo(root: Path, search_parent_directories: bool = False) -> git.Repo:
    """A GitPython repository to read from, on the view of the repository at ``root``
    (``coderag.gitsafe``): none of its git processes reads the repository's own config.
    InvalidGitRepositoryError when ``root`` is not in one."""
    try:
        seen = gitsafe.view(root, search_parent_directories)
    except gitsafe.NotARepository as exc:
        if not root.exists():
            raise git.NoSuchPathError(str(root)) from exc
        raise git.InvalidGitRepositoryError(str(exc)) from exc
    repo = git.Repo(seen.git_dir)
    repo.git.update_environment(**gitsafe.safe_env(), **seen.overrides())
    return repo


def checked_out_branch(root: Path) -> str | None:
    """The branch checked out in the work tree (or clone) at ``root``, read from its HEAD file
    (no git process); None when HEAD is detached or ``root`` is not the top of a repository."""
    try:
        _, git_dir, _ = gitsafe.locate(root)
        head = (git_dir / "HEAD").read_text().strip()
    except (gitsafe.NotARepository, OSError, UnicodeDecodeError):
        return None
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else None


def enclosing_repository(root: Path) -> Path | None:
    """The top of the git work tree ``root`` lies in below its top, or None when ``root`` is
    that top itself or in no repository."""
    try:
        gitsafe.locate(root)
        return None
    except gitsafe.NotARepository:
        pass
    try:
        top, _, _ = gitsafe.locate(root, search_parent_directories=True)
    except gitsafe.NotARepository:
        return None
    return top


def head_commit(root: Path) -> str | None:
    """The commit checked out at ``root``, or None when it is not a git work tree."""
    try:
        return resolve(open_repo(root), "HEAD")
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None


def resolve(repo: git.Repo, rev: str) -> str | None:
    """The commit ``rev`` names in ``repo``, or None when it names none (asked of git: a view's
    refs are links, which GitPython's own ref reader refuses to follow)."""
    try:
        return repo.git.rev_parse("--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    except git.GitCommandError:
        return None


def changed_paths(root: Path, since: str) -> tuple[set[str], set[str]] | None:
    """Paths that may differ from commit ``since``: (changed between ``since`` and HEAD, renames'
    old and new sides included; dirty or untracked in the work tree). None when ``since`` is
    unknown to this repository (history rewritten), meaning a full walk is needed."""
    try:
        repo = open_repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    if resolve(repo, since) is None or resolve(repo, "HEAD") is None:
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
    out = repo.git.status(
        "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all"
    )
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


class Blamed(NamedTuple):
    """The commit that last touched a line: full hash, author, ISO author date, subject, and
    recency (0 for the newest of the commits blamed together, by ancestry)."""

    commit: str
    author: str
    date: str
    summary: str
    recency: int


UNCOMMITTED = "0" * 40
"""What ``git blame`` names as the commit of a line that is not committed yet."""


def newest_first(root: Path, shas: Iterable[str]) -> list[str]:
    """``shas`` ordered newest first: after every commit that descends from it (so clock skew
    and commits made in the same second cannot reorder history); unknown ones are left out."""
    wanted = set(shas)
    if len(wanted) < 2:
        return list(wanted)
    order: list[str] = []
    # --topo-order lists a commit only after all its descendants among the walked ones; the
    # walk can stop as soon as every wanted commit has been listed
    with closing(
        gitrun.output_lines(["rev-list", "--topo-order", "--stdin"], root, "\n".join(wanted))
    ) as lines:
        for sha in lines:
            if sha in wanted:
                order.append(sha)
                if len(order) == len(wanted):
                    break
    return order


def blame(
    root: Path, path: str, start: int | None = None, end: int | None = None
) -> dict[int, Blamed]:
    """Line -> the commit that last touched it, for lines ``start..end`` (all lines without a
    range); {} if the file is untracked or the range is not in it."""
    span = ["-L", f"{start},{end}"] if start is not None and end is not None else []
    try:
        out = open_repo(root).git.blame(
            "--line-porcelain", "-w", "--no-textconv", *span, "--", path
        )
    except (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return {}
    rows: dict[int, tuple[str, str, int, str]] = {}
    sha = author = summary = ""
    final = stamp = 0
    for line in out.split("\n"):  # not splitlines(): a line of code may hold \r or \f
        if line.startswith("\t"):
            rows[final] = (sha, author, stamp, summary)
            continue
        head, _, rest = line.partition(" ")
        if len(head) == 40 and all(c in "0123456789abcdef" for c in head):
            sha, final = head, int(rest.split()[1])
        elif head == "author":
            author = rest
        elif head == "author-time":
            stamp = int(rest)
        elif head == "summary":
            summary = rest
    order = newest_first(root, {r[0] for r in rows.values() if r[0] != UNCOMMITTED})
    rank = {c: i for i, c in enumerate(order)}
    return {n: Blamed(c, a, _iso(t), s, rank.get(c, len(rank))) for n, (c, a, t, s) in rows.items()}


def newest(lines: dict[int, Blamed], start: int, end: int) -> Blamed | None:
    """The newest commit among the committed lines ``start..end`` of a blame, or None when none
    of them is committed."""
    touched = [
        lines[n] for n in range(start, end + 1) if n in lines and lines[n].commit != UNCOMMITTED
    ]
    return min(touched, key=lambda b: b.recency, default=None)


def _iso(stamp: int) -> str:
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
