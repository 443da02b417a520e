"""Git history over line ranges (X7): the last commit that touched a range (``git blame -L``) and
the commits that changed it, optionally within a time window (``git log -L``), each with its
short hash, author, author date, subject and the line ranges its diff changed."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import git
from fastapi import APIRouter

from coderag.deps import CatalogDep, SettingsDep, UserDep
from coderag.errors import InvalidInput
from coderag.history import (
    CommitFact,
    HistoryRequest,
    HistoryResponse,
    LineRange,
    RangeChange,
    RangeHistory,
)
from coderag.responses import errors
from coderag_parser import gitsync, trees

MAX_LOG = 20
"""Most commits reported per range."""

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)
_ERRORS = (git.GitCommandError, git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError)


def _iso(stamp: int) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def line_count(root: Path, path: str) -> int | None:
    """Lines of ``path`` in the work tree as git counts them; None when it is not a regular file
    inside ``root`` (a link out of the repository is not read)."""
    base = root.resolve()
    try:
        target = (base / path).resolve()
        if not target.is_relative_to(base) or not target.is_file():
            return None
        data = target.read_bytes()
    except OSError:
        return None
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def clamp(root: Path, r: LineRange) -> LineRange:
    """``r`` with an end past the file's last line brought back to it (a who/when question about
    a whole file asks for lines ``1..`` a large number); unchanged when the file is unknown."""
    lines = line_count(root, r.file)
    if lines is None or r.end_line <= lines or r.start_line > lines:
        return r
    return r.model_copy(update={"end_line": lines})


def has_history(root: Path) -> bool:
    """Whether ``root`` is a git work tree with at least one commit."""
    try:
        return gitsync.resolve(gitsync.open_repo(root), "HEAD") is not None
    except _ERRORS:
        return False


def last_commit(root: Path, path: str, start: int, end: int) -> CommitFact | None:
    """The newest commit (by ancestry, as ``gitsync.newest`` picks a unit's) among those that last
    touched lines ``start..end`` of ``path``; None when the lines are uncommitted or the file has
    no history."""
    last = gitsync.newest(gitsync.blame(root, path, start, end), start, end)
    if last is None:
        return None
    return CommitFact(
        commit=last.commit[:7], author=last.author, date=last.date, summary=last.summary
    )


def _fact(head: str) -> tuple[str, str, int, str]:
    sha, author, stamp, subject = ([*head.split("\x1f"), "", "", "0", ""])[:4]
    return sha, author, int(stamp or 0), subject


def last_touch(root: Path, path: str) -> CommitFact | None:
    """The newest commit that changed the file ``path`` (across renames), a deletion included
    (blame credits a commit only with the lines it left: one that only deleted or re-indented
    lines was missed as a file's last change)."""
    args = ["-1", "--no-textconv", "--no-ext-diff", "--format=%H%x1f%an%x1f%at%x1f%s", "--follow"]
    try:
        out = gitsync.open_repo(root).git.log(*args, "--", path)
    except _ERRORS:
        return None
    if not out.strip():
        return None
    sha, author, stamp, subject = _fact(out.strip().splitlines()[0])
    return CommitFact(commit=sha[:7], author=author, date=_iso(stamp), summary=subject)


def folder_changes(
    root: Path,
    folder: str,
    indexed: set[str],
    since: datetime | None = None,
    until: datetime | None = None,
    oldest_first: bool = False,
    pickaxe: str | None = None,
) -> list[RangeChange]:
    """Commits that changed indexed files inside ``folder``, newest (or oldest) first, whose
    author date lies in ``[since, until)``; each with the indexed files it changed there (with
    ``pickaxe``, those that added or removed that text)."""
    args = ["--no-textconv", "--no-ext-diff", "--name-only", "--format=%x1e%H%x1f%an%x1f%at%x1f%s"]
    args += _order(oldest_first) + ([f"-S{pickaxe}"] if pickaxe else [])
    if since is not None:
        args.append(f"--since={int(since.timestamp())}")
    try:
        out = gitsync.open_repo(root).git.log(*args, "--", _literal(folder))
    except _ERRORS:
        return []
    found: list[RangeChange] = []
    for record in out.split("\x1e")[1:]:
        head, _, names = record.partition("\n")
        sha, author, stamp, subject = _fact(head)
        when = datetime.fromtimestamp(stamp, UTC)
        files = [f for f in names.split() if f in indexed]
        if (
            not files
            or (since is not None and when < since)
            or (until is not None and when >= until)
        ):
            continue
        found.append(
            RangeChange(
                commit=sha[:7], author=author, date=_iso(stamp), summary=subject, files=files
            )
        )
        if len(found) >= MAX_LOG:
            break
    return found


def _order(oldest_first: bool) -> list[str]:
    """``git log``'s order: the newest ``MAX_LOG * 5`` commits, or the whole history oldest first
    (``-n`` would keep the newest before ``--reverse`` turns them: the commit that added a
    range is the oldest of all)."""
    return ["--reverse"] if oldest_first else [f"-n{MAX_LOG * 5}"]


def _literal(path: str) -> str:
    """A pathspec that means ``path`` exactly (no glob or magic in a folder's name)."""
    return ":(literal)" + path.strip("/")


def changed_lines(diff: str) -> list[list[int]]:
    """The post-image lines a diff adds or changes, as ``[first, last]`` ranges (a pure deletion
    marks the line after it)."""
    rows: list[int] = []
    line = 0
    in_hunk = False
    for text in diff.splitlines():
        if m := _HUNK.match(text):
            # a hunk with no post-image lines (-U0's pure deletion) names the line before it
            line, in_hunk = int(m.group(1)) + (m.group(2) == "0"), True
        elif not in_hunk or text.startswith(("+++", "---")):
            continue
        elif text.startswith("+"):
            rows.append(line)
            line += 1
        elif text.startswith("-"):
            rows.append(line)
        elif not text.startswith("\\"):  # context; "\\ No newline at end of file" is not a line
            line += 1
    out: list[list[int]] = []
    for r in sorted(set(rows)):
        if out and r <= out[-1][1] + 1:
            out[-1][1] = r
        else:
            out.append([r, r])
    return out


def changes(
    root: Path,
    path: str,
    start: int,
    end: int,
    since: datetime | None = None,
    until: datetime | None = None,
    oldest_first: bool = False,
    pickaxe: str | None = None,
) -> list[RangeChange]:
    """Commits that changed lines ``start..end`` of ``path`` (as they are now), newest (or oldest)
    first, whose author date lies in ``[since, until)``; each with the ranges its diff changed
    there. With ``pickaxe``, the commits of the file that added or removed that text instead
    (``git log -S``): the first of them, oldest first, is the one that brought it in."""
    whole = start == 1 and end == line_count(root, path)
    # a whole file's history is its log with patches: the same commits and hunks as -L over all
    # its lines (no context lines needed), without -L's line tracking, slow on long histories
    where = ["-p", "-U0", "--follow", "--", path] if whole else [f"-L{start},{end}:{path}"]  # last
    if pickaxe:  # -L takes no pickaxe: the file's log, the text one argument
        where = ["-p", "-U0", f"-S{pickaxe}", "--follow", "--", path]
    args = [
        "--no-textconv",
        "--no-ext-diff",
        "--format=%x1e%H%x1f%an%x1f%at%x1f%s",
        *_order(oldest_first),
    ]
    if since is not None:  # committer date >= author date, so this only narrows the walk
        args.append(f"--since={int(since.timestamp())}")
    try:
        out = gitsync.open_repo(root).git.log(*args, *where)
    except _ERRORS:
        return []
    found: list[RangeChange] = []
    for record in out.split("\x1e")[1:]:
        head, _, diff = record.partition("\n")
        sha, author, stamp, subject = ([*head.split("\x1f"), "", "", "0", ""])[:4]
        when = datetime.fromtimestamp(int(stamp), UTC)
        if (since is not None and when < since) or (until is not None and when >= until):
            continue
        ranges = changed_lines(diff)
        found.append(
            RangeChange(
                commit=sha[:7], author=author, date=_iso(int(stamp)), summary=subject, ranges=ranges
            )
        )
        if len(found) >= MAX_LOG:
            break
    return found


router = APIRouter(tags=["history"])


def _when(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(f"{name} must be an ISO 8601 date such as 2026-10-01T00:00:00Z") from exc
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


@router.post("/repos/{name}/history", responses=errors(400, 404, 409, 503))
def history(
    name: str, body: HistoryRequest, catalog: CatalogDep, settings: SettingsDep, _user: UserDep
) -> HistoryResponse:
    """Last commit of each range and, with ``log``, the commits that changed it in the window; a
    range that runs past its file's end is answered (and returned) up to the file's last line.
    A whole file's last commit is the newest that touched it, a deletion included. A folder
    that holds indexed files is answered for them (``folder``: the commits that changed them,
    each with the files). A file the index does not hold (never there, or one it skipped:
    binary, too large, excluded) is answered as unknown: the range as asked, no commit."""
    root = trees.root(catalog, settings, name)  # 404 for an unknown repository comes first
    since, until = _when(body.since, "since"), _when(body.until, "until")
    if not has_history(root):
        return HistoryResponse(repo=name, has_history=False, ranges=[])
    # neither git nor a line count reads a file the index refused: a tracked binary, a file
    # over the size limit or a vendored path would otherwise be blamed, logged and read whole
    indexed = catalog.indexed_among(name, [r.file for r in body.ranges])
    out = []
    for asked in body.ranges:
        if asked.file not in indexed:
            inside = catalog.indexed_under(name, asked.file)
            if not inside:
                out.append(RangeHistory(**asked.model_dump(), last=None, changes=[]))
                continue
            every = folder_changes(root, asked.file, inside)
            windowed = since is not None or until is not None or body.oldest_first
            log = (
                folder_changes(
                    root, asked.file, inside, since, until, body.oldest_first, body.pickaxe
                )
                if windowed
                else every
            )
            last = (
                CommitFact(**every[0].model_dump(include=set(CommitFact.model_fields)))
                if every
                else None
            )
            out.append(
                RangeHistory(
                    **asked.model_dump(), last=last, changes=log if body.log else [], folder=True
                )
            )
            continue
        r = clamp(root, asked)
        log = (
            changes(
                root,
                r.file,
                r.start_line,
                r.end_line,
                since,
                until,
                body.oldest_first,
                body.pickaxe,
            )
            if body.log
            else []
        )
        whole = r.start_line == 1 and r.end_line == line_count(root, r.file)
        last = (
            last_touch(root, r.file)
            if whole
            else last_commit(root, r.file, r.start_line, r.end_line)
        )
        out.append(RangeHistory(**r.model_dump(), last=last, changes=log))
    return HistoryResponse(repo=name, has_history=True, ranges=out)
