"""Git on repositories we do not trust: git never reads an indexed repository's own config.

A repository registered by path is someone else's: its ``.git/config`` (and every file it
includes) can name programs git runs (filter and diff drivers, ``core.fsmonitor``, ``core.pager``,
hooks, credential helpers...), and its ``.gitattributes`` choose which of them apply to which
files. Overriding known keys on the command line is a deny-list that a new key or a driver name we
did not think of walks around. So no git process the product starts runs with that repository's
directory as its ``GIT_DIR``: each runs against a private git directory this process owns (a
*view*), whose config we write and which reaches the repository's data only through files git
reads as data, never as configuration:

- ``objects/info/alternates`` names the repository's object directory;
- ``refs``, ``packed-refs``, ``shallow``, ``index`` and ``info/exclude`` are links to the
  repository's own;
- ``HEAD`` is a copy, refreshed on every use (git insists on a regular file there);
- ``config`` holds only an allow-list of inert keys copied from the repository's (file modes,
  line endings, the object format), each checked to be a plain word.

``.gitattributes`` in the work tree can still name a filter or diff driver, but with no such
driver configured git treats the file as plain bytes. Submodules are never entered (a submodule
is a repository with a config of its own). The server's own system and global git config are
kept: they are the operator's (a credential helper for private remotes lives there).
Clones the product makes (``data_dir/repos``, ``data_dir/trees``) are written by git from a
remote and carry no config a remote can choose; a clone or fetch whose source is a local
repository reads it through its view too (``upload_source``).

Nothing a view reaches lies outside the directories the server may read (``allowed_dirs``: the
``CODERAG_REPO_ROOTS``, the data directory's clones, and the directory asked about): a gitfile,
a ``.git`` link, ``commondir``, ``objects/info/alternates`` (and theirs, as git follows them),
links under ``refs`` and ``objects``, and the files a view links are resolved on every ``locate``
and the repository refused (``Refused``) when one escapes. Files git or this module reads
whole must be regular files of a bounded size: a FIFO, a device or a huge file there is refused
without blocking on it. Those checks live in ``coderag.gitroots``.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from coderag.gitroots import ALTERNATES_DEPTH as ALTERNATES_DEPTH
from coderag.gitroots import CONFIG_FILE as CONFIG_FILE
from coderag.gitroots import SMALL_FILE as SMALL_FILE
from coderag.gitroots import NotARepository as NotARepository
from coderag.gitroots import Refused as Refused
from coderag.gitroots import allowed_dirs as allowed_dirs
from coderag.gitroots import locate as locate
from coderag.gitroots import read_small as read_small

SAFE_CONFIG = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.sshCommand", "ssh -o BatchMode=yes"),
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("protocol.allow", "never"),
)
"""Settings given to every git process at command-line priority, a second line behind the views:
no fsmonitor or hook program, ssh never asks, submodules never entered, no transport unless
allowed."""

PROTOCOLS = {"https": ("https",), "http": ("http",), "ssh": ("ssh",), "file": ("file",)}
"""git transports each ``CODERAG_URL_SCHEMES`` kind needs."""

LOCATION_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
)
"""Variables that would point git at another repository than the one we mean; never inherited."""

INERT_KEYS = frozenset(
    {
        "core.repositoryformatversion",
        "core.filemode",
        "core.symlinks",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.autocrlf",
        "core.eol",
        "core.checkstat",
        "core.trustctime",
        "core.protecthfs",
        "core.protectntfs",
        "extensions.objectformat",
    }
)
"""The only keys of a repository's own config its view copies: how to read its files and
objects, each a boolean or a word, none a program."""

_WORD = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
_HEAD = re.compile(r"^(ref: refs/[^\x00-\x20\x7f~^:?*\[\\]+|[0-9a-f]{40}|[0-9a-f]{64})\n?$")


GIT_FAILED = "git failed on this repository; the server's log has git's own message"
"""What a reader is told in place of git's output (``public_error``)."""

_GIT_OUTPUT = re.compile(r"Cmd\('git'\) failed|\bstderr: |\bgit [a-z-]+ failed: ")
"""Where git's own words begin in an error: GitPython's ``GitCommandError``, and the last line
of a clone's or fetch's stderr (``gitrun.run_limited``); its time and size stops are ours."""


def public_error(error: str | None) -> str | None:
    """``error`` as any reader may see it: when it carries git's output (which can quote a
    file the repository links to, and names the server's paths), the generic ``GIT_FAILED``
    instead; the whole text stays in the log, where the failing stage wrote it."""
    if error is None or not _GIT_OUTPUT.search(error):
        return error
    return ("retrying after " if error.startswith("retrying after ") else "") + GIT_FAILED


def safe_env(kinds: Iterable[str] = ()) -> dict[str, str]:
    """Environment variables that give git ``SAFE_CONFIG`` plus the transports of ``kinds``."""
    pairs = list(SAFE_CONFIG)
    for kind in kinds:
        pairs += [(f"protocol.{p}.allow", "always") for p in PROTOCOLS.get(kind, ())]
    env = {
        "GIT_CONFIG_COUNT": str(len(pairs)),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "echo",
        # a read never rewrites the repository's index (git status refreshes it otherwise)
        "GIT_OPTIONAL_LOCKS": "0",
    }
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def process_env(kinds: Iterable[str] = (), **extra: str) -> dict[str, str]:
    """A whole environment for a git process: this one's, less ``LOCATION_VARS``, plus
    ``safe_env(kinds)`` and ``extra``."""
    base = {k: v for k, v in os.environ.items() if k not in LOCATION_VARS}
    return {**base, **safe_env(kinds), **extra}


@dataclass(frozen=True)
class View:
    """A private git directory over a repository: run git with ``env`` (``GIT_DIR`` is the view,
    ``GIT_WORK_TREE`` the repository's work tree, or none for a bare repository)."""

    git_dir: Path
    work_tree: Path | None
    objects: Path

    def overrides(self) -> dict[str, str]:
        """The variables to add to ``process_env()`` for git to use this view."""
        env = {"GIT_DIR": str(self.git_dir)}
        if self.work_tree is not None:
            env["GIT_WORK_TREE"] = str(self.work_tree)
        return env

    @property
    def env(self) -> dict[str, str]:
        """The whole environment of a git process on this view."""
        return process_env(**self.overrides())


_base: Path | None = None
_lock = threading.Lock()


def _views_dir() -> Path:
    """The folder of views: one per user in the temporary directory, shared by this user's
    processes (a view is only links and a few small files, refreshed on each use), refused
    unless it is a real directory only this user can enter; else a private one for this
    process, removed at exit."""
    global _base
    with _lock:
        if _base is None:
            path = Path(tempfile.gettempdir()) / f"coderag-git-{os.getuid()}"
            try:
                path.mkdir(mode=0o700, exist_ok=True)
                st = os.lstat(path)
                mine = stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
                if mine and not st.st_mode & 0o077:
                    _base = path
            except OSError:
                pass
            if _base is None:
                _base = Path(tempfile.mkdtemp(prefix="coderag-git-"))
                atexit.register(shutil.rmtree, _base, True)
        return _base


def view(root: Path, search_parent_directories: bool = False) -> View:
    """The private view of the repository at ``root`` (made on first use, refreshed on each);
    NotARepository when ``root`` is not in one or its HEAD is not a ref or commit, Refused
    when the repository reaches outside ``allowed_dirs`` or holds a special file (``locate``)."""
    work_tree, git_dir, common = locate(root, search_parent_directories)
    head = read_small(git_dir / "HEAD", f"{git_dir}/HEAD")
    if not _HEAD.match(head):
        raise NotARepository(f"{git_dir}/HEAD names neither a ref nor a commit")
    key = hashlib.sha256(f"{git_dir}\0{work_tree}".encode()).hexdigest()[:32]
    shadow = _views_dir() / key
    (shadow / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (shadow / "info").mkdir(exist_ok=True)
    stamp = _stamp(common / "config")
    try:
        fresh = (shadow / "config.stamp").read_text() == stamp
    except OSError:
        fresh = False
    if not fresh:  # made, or the repository's config changed since
        _replace_text(shadow / "config", _config(common / "config", work_tree))
        _replace_text(shadow / "config.stamp", stamp)
    objects = common / "objects"
    _replace_text(shadow / "objects" / "info" / "alternates", f"{objects}\n")
    for name in ("refs", "packed-refs", "shallow"):
        _link(shadow / name, common / name)
    _link(shadow / "info" / "exclude", common / "info" / "exclude")
    _link(shadow / "index", git_dir / "index")
    for shared in git_dir.glob("sharedindex.*"):  # a split index names its base by the git dir
        _link(shadow / shared.name, shared)
    _replace_text(shadow / "HEAD", head if head.endswith("\n") else head + "\n")
    return View(shadow, work_tree, objects)


def _stamp(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "none"
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}"


def _config(path: Path, work_tree: Path | None) -> str:
    """The view's config: the repository's ``INERT_KEYS`` whose values are plain words."""
    copied: dict[str, str] = {}
    if path.is_file():
        # --file without --includes reads that one file, as data: nothing in it runs
        done = subprocess.run(
            ["git", "config", "--file", str(path), "--no-includes", "--list", "-z"],
            capture_output=True,
            cwd="/",
            env=process_env(),
            timeout=30,
            check=False,
        )
        for entry in done.stdout.split(b"\0"):
            key, _, value = entry.decode(errors="replace").partition("\n")
            if key in INERT_KEYS and _WORD.match(value):
                copied[key] = value
    sections: dict[str, list[str]] = {"core": [], "extensions": [], "gc": ["auto = 0"]}
    sections["core"].append(f"bare = {'true' if work_tree is None else 'false'}")
    if work_tree is not None:
        quoted = str(work_tree).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        sections["core"].append(f'worktree = "{quoted}"')
    for key, value in copied.items():
        section, name = key.split(".", 1)
        sections[section].append(f"{name} = {value}")
    out = []
    for section, lines in sections.items():
        if lines:
            out.append(f"[{section}]\n" + "".join(f"\t{line}\n" for line in lines))
    return "".join(out)


def _replace_text(path: Path, text: str) -> None:
    """Write ``path`` whole (another thread or process of ours may be reading it) unless it
    already holds ``text``."""
    try:
        if path.read_text() == text:
            return
    except (OSError, UnicodeDecodeError):
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _link(path: Path, target: Path) -> None:
    """Make ``path`` a symbolic link to ``target`` (which may not exist yet)."""
    try:
        if os.readlink(path) == str(target):
            return
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, path)


def local_source(source: str) -> Path | None:
    """The directory a clone or fetch ``source`` names on this machine (a path or a file://
    URL), or None for a remote URL."""
    if source.startswith("file://"):
        return Path(unquote(urlsplit(source).path))
    if "://" in source or re.match(r"^[^/]+:", source):
        return None
    return Path(source)


def upload_source(source: str, as_path: bool = False) -> str:
    """What to hand ``git clone`` or ``git fetch`` for ``source``: a remote URL as it is; a
    local repository as a file:// URL of its view (or its path with ``as_path``, for
    ``clone --shared``, which borrows objects only from a path), so the ``git upload-pack``
    serving it runs with our config, not the repository's. Refused when the local repository
    reaches outside ``allowed_dirs`` (``locate``)."""
    local = local_source(source)
    if local is None:
        return source
    try:
        seen = view(local).git_dir
    except Refused:
        raise  # never handed to git as it is: git would follow what the view refused
    except NotARepository:
        return source  # git reports what is wrong with it
    return str(seen) if as_path else seen.as_uri()


def run(
    root: Path, args: list[str], search_parent_directories: bool = False, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``git args`` on the view of the repository at ``root``, in ``root``; its output as text.
    NotARepository when ``root`` is not in a repository."""
    env = view(root, search_parent_directories).env
    return subprocess.run(
        ["git", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        check=False,
    )
