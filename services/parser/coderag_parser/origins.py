"""Where a repository may come from: local paths under ``CODERAG_REPO_ROOTS``, git URLs of the
allowed kinds and hosts without credentials, branches git itself would accept."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

from coderag.errors import Forbidden, InvalidInput
from coderag.schemas import BRANCH_PATTERN, GIT_URL_PATTERN
from coderag.settings import Settings

URL_KINDS = ("https", "http", "ssh", "file")
"""Kinds of git URL that ``CODERAG_URL_SCHEMES`` can allow."""

_NOT_A_URL = (
    "url must be a git URL: https://host/path, http://host/path, ssh://[user@]host/path, "
    "user@host:path or file:///path"
)
_GIT_URL = re.compile(GIT_URL_PATTERN)
_BRANCH = re.compile(BRANCH_PATTERN)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCP = re.compile(r"^(?:(?P<user>[^@/:]+)@)?(?P<host>[A-Za-z0-9.\-\[\]]+):(?P<path>.*)$")
_HELPER = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


def _split(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


def allowed_roots(settings: Settings) -> list[Path]:
    """Directories a path repository must lie under; [] when registering by path is off."""
    if settings.repo_roots is None:
        return [Path.cwd().resolve()]
    return [Path(p).expanduser().resolve() for p in _split(settings.repo_roots)]


def _expand(raw: str, what: str) -> Path:
    try:
        return Path(raw).expanduser().resolve()
    except RuntimeError as exc:  # "~nouser", or a symlink loop
        user = raw.split("/", 1)[0]
        if raw.startswith("~"):
            raise InvalidInput(f"{what} {raw!r}: {user} is not a user on the server") from exc
        raise InvalidInput(f"{what} {raw!r} cannot be resolved: {exc}") from exc
    except (OSError, ValueError) as exc:  # an embedded NUL byte, a name too long
        raise InvalidInput(f"{what} {raw!r} is not a usable path: {exc}") from exc


def _under_roots(resolved: Path, raw: str, settings: Settings) -> None:
    roots = allowed_roots(settings)
    if not roots:
        raise Forbidden(
            "registering a repository by path is off on this server (CODERAG_REPO_ROOTS is "
            "empty); register it by url, or set CODERAG_REPO_ROOTS to the directories allowed"
        )
    if not any(resolved.is_relative_to(root) for root in roots):
        shown = ", ".join(str(r) for r in roots)
        raise Forbidden(
            f"path {raw!r} resolves to {resolved}, outside CODERAG_REPO_ROOTS ({shown}); "
            "add its parent directory to that setting to allow it"
        )


def check_path(raw: str, settings: Settings) -> str:
    """The resolved directory for ``{"path": raw}``: Forbidden outside the allowed roots,
    InvalidInput when it cannot be resolved, does not exist or is not a directory."""
    resolved = _expand(raw, "path")
    _under_roots(resolved, raw, settings)
    if not resolved.exists():
        raise InvalidInput(f"path {raw!r} does not exist on the server")
    if not resolved.is_dir():
        raise InvalidInput(f"path {raw!r} is not a directory")
    return str(resolved)


def url_kind(url: str) -> tuple[str, str, bool]:
    """(kind, host, carries a password or token) of a git URL; InvalidInput for what git would
    read as an option or a remote helper, and for anything that is not a git URL."""
    if not url or url.startswith("-") or _CONTROL.search(url):
        raise InvalidInput("url must be a git URL without spaces or control characters")
    if _HELPER.match(url):
        raise InvalidInput("url names a git remote helper (<transport>::); give a git URL")
    if _SCHEME.match(url):
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        try:
            host = (parts.hostname or "").lower()
            _ = parts.port  # ValueError when the port is not a number
        except ValueError as exc:
            raise InvalidInput(f"url is not a valid URL for a git URL: {exc}") from exc
        # a user name alone is how ssh logs in; anything with a secret is a credential
        secret = parts.password is not None or (scheme in ("https", "http") and parts.username)
        if scheme in URL_KINDS and (scheme == "file" or host):
            return scheme, host, bool(secret)
    elif match := _SCP.match(url):
        return "ssh", match["host"].lower(), False
    raise InvalidInput(_NOT_A_URL)


def check_url(url: str, settings: Settings) -> str:
    """``url`` if this server may clone it, else InvalidInput or Forbidden saying which
    setting allows it."""
    kind, host, secret = url_kind(url)
    if secret:
        raise InvalidInput(
            "url carries credentials, which would be stored and shown by GET /repos; remove "
            "them and give the server's git a credential helper, or use ssh with a deploy key"
        )
    if not _GIT_URL.search(url):
        raise InvalidInput(_NOT_A_URL)
    allowed = {k.lower() for k in _split(settings.url_schemes)}
    if kind not in allowed:
        raise Forbidden(
            f"{kind} repository URLs are not allowed here (CODERAG_URL_SCHEMES="
            f"{settings.url_schemes or '(empty)'}); add {kind!r} to that setting to allow them"
        )
    hosts = [h.lower() for h in _split(settings.url_hosts)]
    if kind != "file" and hosts and not any(_host_matches(host, h) for h in hosts):
        raise Forbidden(f"host {host!r} is not in CODERAG_URL_HOSTS ({settings.url_hosts})")
    if kind == "file":
        raw = unquote(urlsplit(url).path)
        _under_roots(_expand(raw, "url"), raw, settings)
    return url


def _host_matches(host: str, allowed: str) -> bool:
    if allowed.startswith("."):
        return host.endswith(allowed) or host == allowed[1:]
    return host == allowed


def check_branch(branch: str) -> str:
    """``branch`` if ``git check-ref-format --branch`` accepts it, else InvalidInput."""
    if not _BRANCH.search(branch) or branch.endswith("\n"):
        raise InvalidInput(f"branch {branch!r} is not a valid git branch name")
    done = subprocess.run(
        ["git", "check-ref-format", "--branch", branch],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=10,
        check=False,
    )
    if done.returncode != 0 or done.stdout.rstrip("\n") != branch:  # keep unicode spaces
        raise InvalidInput(f"branch {branch!r} is not a valid git branch name")
    return branch
