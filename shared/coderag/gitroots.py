"""Where git may read: the directories a repository's git data must stay inside, and the checks
that refuse one whose gitfile, ``.git`` link, ``commondir``, alternates or linked files escape
them or are special files (``gitsafe`` builds its views on what ``locate`` returns).

Every path is resolved on every ``locate`` (links followed), and each file read whole must be a
regular file of a bounded size: a FIFO, a device or a huge file is refused without blocking on
it (a read of ``SMALL_FILE`` bytes at most, never a wait).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from coderag.errors import Forbidden
from coderag.settings import get_settings

SMALL_FILE = 64 * 1024
"""Largest HEAD, gitfile, ``commondir``, alternates list or loose ref read: each is a line."""

CONFIG_FILE = 1024 * 1024
"""Largest repository config whose inert keys a view copies."""

ALTERNATES_DEPTH = 8
"""Alternates of alternates followed (git stops at 5); a deeper chain is refused."""


class NotARepository(ValueError):
    """The directory is not (inside) a git work tree or repository we can read."""


class Refused(NotARepository, Forbidden):
    """A repository git must not read: something it would follow reaches outside
    ``allowed_dirs``, or a file it reads is not a regular file of a sane size (403)."""

    def __init__(self, detail: str) -> None:
        NotARepository.__init__(self, detail)
        self.detail = detail


def allowed_dirs(root: Path) -> list[Path]:
    """Directories git may read for the repository at ``root`` (all resolved): the
    ``CODERAG_REPO_ROOTS`` (unset: the working directory), the data directory (the product's
    clones, and a ref's clone borrowing from a registered repository) and ``root`` itself (a
    repository the operator names on the command line)."""
    settings = get_settings()
    if settings.repo_roots is None:
        roots = [Path.cwd()]
    else:
        roots = [Path(p.strip()).expanduser() for p in settings.repo_roots.split(",") if p.strip()]
    return [Path(os.path.realpath(p)) for p in (*roots, settings.data_dir, root)]


def _inside(path: Path, allowed: list[Path]) -> bool:
    real = Path(os.path.realpath(path))
    return any(real.is_relative_to(a) for a in allowed)


def _contained(path: Path, allowed: list[Path], what: str) -> None:
    """Refused when ``path``, links resolved, lies outside ``allowed`` (the target is not
    named: it is none of the reader's business)."""
    if not _inside(path, allowed):
        raise Refused(
            f"{what} leads outside the directories this server may read (CODERAG_REPO_ROOTS); "
            "register the repository it points to, under those directories, instead"
        )


def _regular(path: Path, what: str, limit: int | None = None) -> None:
    """Refused unless ``path`` (links followed) is a regular file of at most ``limit`` bytes;
    a stat, never an open, so a FIFO cannot block it."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise NotARepository(f"{what} cannot be read ({exc.strerror})") from exc
    if not stat.S_ISREG(st.st_mode):
        raise Refused(
            f"{what} is not a regular file (a FIFO, device or directory); git must not read it"
        )
    if limit is not None and st.st_size > limit:
        raise Refused(f"{what} is {st.st_size} bytes; a file there holds at most {limit}")


def read_small(path: Path, what: str, limit: int = SMALL_FILE) -> str:
    """The text of ``path``, a regular file of at most ``limit`` bytes; Refused for a FIFO,
    a device or a larger file (opened without blocking, read ``limit`` + 1 bytes at most),
    NotARepository when it cannot be read or is not UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise NotARepository(f"{what} cannot be read ({exc.strerror})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{what} is not a regular file (a FIFO, device or directory)")
        data = os.read(fd, limit + 1)
    except OSError as exc:
        raise NotARepository(f"{what} cannot be read ({exc.strerror})") from exc
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Refused(f"{what} is larger than {limit} bytes; a file there holds one line")
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise NotARepository(f"{what} is not UTF-8 text") from exc


def locate(root: Path, search_parent_directories: bool = False) -> tuple[Path | None, Path, Path]:
    """(work tree or None for a bare repository, git directory, common git directory) of the
    repository at ``root``; NotARepository when there is none (with
    ``search_parent_directories``, the nearest enclosing one is found as git would, but not
    above ``allowed_dirs``), Refused when what git would read escapes those directories or is a
    special or oversized file."""
    cur = Path(os.path.abspath(root))
    if not cur.is_dir():
        raise NotARepository(f"{root} is not a directory")
    allowed = allowed_dirs(cur)
    while True:
        dotgit = cur / ".git"
        if os.path.lexists(dotgit):
            if dotgit.is_dir():  # a directory, or a link to one
                git_dir = dotgit
            elif dotgit.is_file():
                git_dir = _gitfile(dotgit, allowed)
            elif dotgit.exists():  # a FIFO or a device: never opened
                raise Refused(f"{dotgit} is not a regular file (a FIFO or device)")
            else:
                raise NotARepository(f"{dotgit} is a link to nothing")
            _contained(git_dir, allowed, f"{dotgit}")
            _head(git_dir, allowed)
            common = _common(git_dir, allowed)
            if not _is_git_dir(git_dir, common):
                raise NotARepository(f"{dotgit} does not lead to a git directory")
            _check_repository(git_dir, common, allowed)
            return cur, git_dir, common
        if (cur / "objects").is_dir() and (cur / "refs").is_dir() and _head(cur, allowed):
            common = _common(cur, allowed)
            if _is_git_dir(cur, common):
                _check_repository(cur, common, allowed)
                return None, cur, common
        parent = cur.parent
        # like GIT_CEILING_DIRECTORIES: a repository enclosing the allowed directories is none
        # of ours, and a plain directory under them is read as plain files
        if not search_parent_directories or parent == cur or not _inside(parent, allowed):
            raise NotARepository(f"{root} is not in a git repository")
        cur = parent


def _gitfile(dotgit: Path, allowed: list[Path]) -> Path:
    _contained(dotgit, allowed, f"{dotgit}")
    text = read_small(dotgit, f"{dotgit}").strip()
    if not text.startswith("gitdir: "):
        raise NotARepository(f"{dotgit} is not a gitdir file")
    target = Path(text.removeprefix("gitdir: "))
    return Path(os.path.normpath(dotgit.parent / target))


def _common(git_dir: Path, allowed: list[Path]) -> Path:
    commondir = git_dir / "commondir"
    if not os.path.lexists(commondir):
        return git_dir
    _contained(commondir, allowed, f"{commondir}")
    rel = read_small(commondir, f"{commondir}").strip()
    common = Path(os.path.normpath(git_dir / rel))
    _contained(common, allowed, f"{commondir}")
    return common


def _head(git_dir: Path, allowed: list[Path]) -> bool:
    """Whether ``git_dir`` has a HEAD; Refused when it escapes ``allowed`` or is not a small
    regular file (a FIFO would block git and us, a device or huge file flood us), so that a
    git directory with such a HEAD is never taken for a plain directory."""
    head = git_dir / "HEAD"
    if not os.path.lexists(head):
        return False
    _contained(head, allowed, f"{head}")
    read_small(head, f"{head}")
    return True


def _is_git_dir(git_dir: Path, common: Path | None = None) -> bool:
    common = common or git_dir
    return (
        (git_dir / "HEAD").is_file()
        and (common / "objects").is_dir()
        and (common / "refs").is_dir()
    )


def _check_repository(git_dir: Path, common: Path, allowed: list[Path]) -> None:
    """Refused unless every file and directory git reads through a view of this repository
    lies under ``allowed`` and is what it should be (regular files of sane sizes)."""
    head = git_dir / "HEAD"
    _contained(head, allowed, f"{head}")
    read_small(head, f"{head}")
    config = common / "config"
    if os.path.lexists(config):
        _contained(config, allowed, f"{config}")
        _regular(config, f"{config}", CONFIG_FILE)
    # the files a view links: git reads each whole (mmap for the index and packed-refs)
    linked = [common / n for n in ("packed-refs", "shallow", "info/exclude")]
    linked += [git_dir / "index", *git_dir.glob("sharedindex.*")]
    for path in linked:
        if os.path.lexists(path):
            _contained(path, allowed, f"{path}")
            if path.exists():  # a dangling link git reads as no file
                _regular(path, f"{path}")
    _check_refs(common / "refs", allowed)
    _check_objects(common / "objects", allowed, 0)


def _check_refs(refs: Path, allowed: list[Path]) -> None:
    """Every loose ref a small regular file under ``allowed``; a link naming ``refs/...`` is a
    symbolic ref, which git reads no file for."""
    _contained(refs, allowed, f"{refs}")
    stack = [refs]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            raise NotARepository(f"{folder} cannot be listed ({exc.strerror})") from exc
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                if os.readlink(path).startswith("refs/"):
                    continue
                _contained(path, allowed, f"{path}")
                if not path.is_dir():
                    _regular(path, f"{path}", SMALL_FILE)
            elif entry.is_dir(follow_symlinks=False):
                stack.append(path)
            else:
                _regular(path, f"{path}", SMALL_FILE)


def _check_objects(objects: Path, allowed: list[Path], depth: int) -> None:
    """The object directory, its links (fan-out folders, packs, info files) and the alternates
    git would follow from it all under ``allowed``; no special file among its packs. Loose
    objects are not listed one by one (git checks each against its name when it reads it)."""
    _contained(objects, allowed, f"{objects}")
    for folder in (objects, objects / "pack", objects / "info"):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                _contained(path, allowed, f"{path}")
            if folder != objects and not entry.is_dir() and not entry.is_file():
                raise Refused(f"{path} is not a regular file (a FIFO or device)")
    alternates = objects / "info" / "alternates"
    if not os.path.lexists(alternates):
        return
    if depth >= ALTERNATES_DEPTH:
        raise Refused(f"{alternates}: alternates chained deeper than {ALTERNATES_DEPTH}")
    _contained(alternates, allowed, f"{alternates}")
    for line in read_small(alternates, f"{alternates}").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith('"'):
            raise Refused(f"{alternates} names a quoted path, which this server does not follow")
        other = Path(os.path.normpath(objects / line))
        _contained(other, allowed, f"{alternates}")
        if other.is_dir():
            _check_objects(other, allowed, depth + 1)
