"""Who is calling and what they may do: API tokens with roles, parsed from
``CODERAG_API_TOKENS`` (``user:token`` or ``user:token:role``), and the repositories each may
read, from the grants file ``CODERAG_GRANTS`` names (docs/ACCESS.md)."""

from __future__ import annotations

import contextvars
import fnmatch
import json
import logging
import re
import stat
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROLES = ("admin", "reader")
"""Roles a token can carry: ``admin`` may also register, reindex and delete repositories and
export the audit log; ``reader`` may search, ask and read repository state."""

DEFAULT_ROLE = "admin"
"""Role of a token written in the older ``user:token`` form, which could do everything."""

_USER = re.compile(r"^[^\s:,]{1,128}$")


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: the user written to the audit log and their role."""

    user: str
    role: str
    grants: Path | None = None
    """The grants file (``CODERAG_GRANTS``); None: this caller reads every repository."""

    def may(self, role: str) -> bool:
        """Whether this caller holds ``role`` (an admin holds every role)."""
        return self.role == "admin" or self.role == role

    def may_read(self, repo: str) -> bool:
        """Whether this caller may read repository ``repo`` (a ref's key: its repository's
        grant); an admin, and everyone while no grants file is configured, reads them all."""
        if self.role == "admin" or self.grants is None:
            return True
        return current_grants(self.grants).allows(self.user, repo)


def parse_tokens(spec: str, grants: Path | None = None) -> dict[str, Principal]:
    """Map each token of a ``CODERAG_API_TOKENS`` value to its principal (reading what
    ``grants`` allows it); ValueError naming the entry that is not ``user:token`` or
    ``user:token:role``."""
    out: dict[str, Principal] = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        parts = item.split(":")
        if len(parts) == 2:
            user, token, role = parts[0], parts[1], DEFAULT_ROLE
        elif len(parts) == 3:
            user, token, role = parts
        else:
            raise ValueError(
                f"CODERAG_API_TOKENS entry {_shown(item)} is not user:token or user:token:role "
                "(tokens cannot contain ':' or ',')"
            )
        if not _USER.match(user) or not token.strip() or token != token.strip():
            raise ValueError(
                f"CODERAG_API_TOKENS entry {_shown(item)} needs a user name (no spaces) and a "
                "non-empty token without surrounding spaces"
            )
        if role not in ROLES:
            raise ValueError(
                f"CODERAG_API_TOKENS entry for user {user!r} has role {role!r}; roles: "
                + ", ".join(ROLES)
            )
        if token in out:
            raise ValueError(f"CODERAG_API_TOKENS gives user {user!r} a token already in use")
        out[token] = Principal(user, role, grants)
    return out


def _shown(item: str) -> str:
    """The entry with its token hidden, so a start-up error never prints a secret."""
    user = item.split(":", 1)[0]
    return repr(f"{user}:…") if ":" in item else repr(item[:2] + "…")


# Per-repository grants (issue 45) ---------------------------------------------------------------

EVERYONE = "*"
"""A grants key naming every token."""

REF_SEPARATOR = "@"
"""Between a repository's name and its ref in a ref's key (``coderag.store.refs.SEPARATOR``):
a ref is read with its repository's grant."""

_PATTERN = re.compile(r"^[A-Za-z0-9._\-*?\[\]!]{1,128}$")
"""A repository name or glob pattern (``*``, ``?``, ``[...]``): no ``@``, no ``/``."""

MAX_GRANTS_BYTES = 1024 * 1024
"""Largest grants file read."""

_KEYS = ("groups", "grants")
"""The top-level tables of a grants file."""

log = logging.getLogger(__name__)


class GrantsError(ValueError):
    """A grants file that cannot be read or does not say who reads what; the message names the
    file and what to fix."""


@dataclass(frozen=True)
class Grants:
    """Who reads what: repository patterns per user (a token's name) or group of users."""

    groups: dict[str, frozenset[str]] = field(default_factory=dict)
    """Each group's users."""
    patterns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Repository names or glob patterns per user or group (``*``: every user)."""

    def patterns_of(self, user: str) -> tuple[str, ...]:
        """Every pattern granted to ``user``: its own, its groups' and everyone's."""
        keys = {user, EVERYONE} | {g for g, users in self.groups.items() if user in users}
        return tuple(p for key in sorted(keys) for p in self.patterns.get(key, ()))

    def allows(self, user: str, repo: str) -> bool:
        """Whether ``user`` may read repository ``repo`` (a ref's key: its repository)."""
        return self.reader(user)(repo)

    def reader(self, user: str) -> Callable[[str], bool]:
        """``allows`` for one user, its patterns gathered and compiled once (a request lists
        many repositories)."""
        either = "|".join(fnmatch.translate(p) for p in self.patterns_of(user)) or "(?!)"
        match = re.compile(either).match  # fnmatch.translate is case-sensitive, as names are
        return lambda repo: match(repo.split(REF_SEPARATOR, 1)[0]) is not None


def read_grants(path: Path) -> Grants:
    """The grants a TOML or JSON file states; GrantsError naming the file and what is wrong."""
    where = f"grants file {str(path)!r} (CODERAG_GRANTS)"
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise GrantsError(f"{where} must end in .toml or .json")
    try:
        # a FIFO or device here would block the request that reads it, a huge file flood it
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_GRANTS_BYTES:
            raise GrantsError(f"{where} must be a regular file under {MAX_GRANTS_BYTES} bytes")
        with path.open("rb") as f:
            raw = f.read(MAX_GRANTS_BYTES + 1)
    except OSError as exc:
        raise GrantsError(f"{where} cannot be read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        kind = suffix[1:].upper()
        raise GrantsError(f"{where} is not valid UTF-8 {kind}: {exc}"[:500]) from None
    try:
        return _grants(data)
    except GrantsError as exc:
        raise GrantsError(f"{where}: {exc}") from None


def _grants(data: object) -> Grants:
    """The grants of a parsed file; GrantsError saying which entry is wrong."""
    if not isinstance(data, dict):
        raise GrantsError("the top level must be a table with [groups] and [grants]")
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise GrantsError(f"unknown table {unknown[0]!r}; a grants file has [groups] and [grants]")
    groups = {k: frozenset(v) for k, v in _lists(data.get("groups", {}), "groups").items()}
    for group, users in groups.items():
        if bad := sorted(u for u in users if not _USER.match(u)):
            raise GrantsError(f"group {group!r} lists {bad[0]!r}, which is no user name")
    patterns = _lists(data.get("grants", {}), "grants")
    for key, granted in patterns.items():
        for pattern in granted:
            if REF_SEPARATOR in pattern:
                raise GrantsError(
                    f"grants.{key} names {pattern!r}; grant the repository (its refs come with "
                    "it), without '@'"
                )
            if not _PATTERN.match(pattern):
                raise GrantsError(
                    f"grants.{key} names {pattern!r}; a pattern is a repository name with * ? "
                    "or [...] wildcards"
                )
    return Grants(groups, {k: tuple(v) for k, v in patterns.items()})


def _lists(table: object, name: str) -> dict[str, list[str]]:
    """``table`` as names mapped to lists of strings (a lone string is a list of one)."""
    if not isinstance(table, dict):
        raise GrantsError(f"{name} must be a table of names to lists of names")
    out: dict[str, list[str]] = {}
    for key, value in table.items():
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise GrantsError(f"{name}.{key} must be a list of strings, not {value!r}"[:300])
        out[str(key)] = items
    return out


@dataclass
class _Loaded:
    """A grants file as last read: the file's identity then, what was in force, and the error
    of that read (the grants in force are then the last good ones)."""

    stamp: tuple[int, ...]
    grants: Grants
    error: str | None


_lock = threading.Lock()
_loaded: dict[Path, _Loaded] = {}


def _stamp(path: Path) -> tuple[int, ...]:
    """What changes when the file is edited or replaced (mtime alone can tie within a tick)."""
    try:
        st = path.stat()
    except OSError:
        return ()
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def current_grants(path: Path) -> Grants:
    """The grants in force: ``path`` read again whenever it changed; a version that cannot be
    used is logged and the last good one stays in force (none yet: nobody reads anything)."""
    stamp = _stamp(path)
    with _lock:
        known = _loaded.get(path)
        if known is not None and known.stamp == stamp:
            return known.grants
    try:
        grants, error = read_grants(path), None
    except GrantsError as exc:
        grants, error = (known.grants if known else Grants()), str(exc)
        log.error("%s; the grants read before stay in force", error)
    if _stamp(path) == stamp:  # a file rewritten during the read is read again next time
        with _lock:
            _loaded[path] = _Loaded(stamp, grants, error)
    return grants


def grants_problem(path: Path) -> str | None:
    """Why the grants file's current version is not in force, or None when it is."""
    current_grants(path)
    with _lock:
        known = _loaded.get(path)
    return known.error if known else None


reading: contextvars.ContextVar[Callable[[str], bool] | None] = contextvars.ContextVar(
    "coderag_reading", default=None
)
"""Set per HTTP request while grants are configured: whether the caller may read a repository
(None: every repository). The catalog answers a repository it may not read as missing."""
