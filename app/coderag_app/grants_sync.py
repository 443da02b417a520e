"""``coderag grants-sync`` (issue 45): per-repository grants that follow the code host. The teams
of a GitHub or Gitea/Forgejo organization, or the groups of a GitLab group, are read over the
host's REST API; each becomes a group of the grants file (``CODERAG_GRANTS``) whose members are
the coderag users of the team's logins and whose grants are the coderag repositories registered
from the team's repositories. Entries the admin wrote in a base file are kept; the file is
checked with ``coderag.auth.read_grants`` and renamed into place whole, so the running server
never reads half a file or one it would refuse (docs/ACCESS.md, "Grants from the code host")."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from coderag.auth import Grants, GrantsError, read_grants
from coderag.errors import CoderagError
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag.store.repos import Repo
from coderag_app.code_hosts import (
    DEFAULT_API,
    DEFAULT_TOKEN_ENV,
    SCOPES,
    HostAccess,
    Org,
    SyncError,
    Team,
    read_org,
)
from coderag_parser.webhooks import normalise_url

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_MAP_TABLES = ("users", "repos")


@dataclass(frozen=True)
class NameMap:
    """The ``--users`` file: code-host logins to coderag users, and host repositories to the
    coderag repositories registered from a path (no URL to match them by)."""

    users: dict[str, str] = field(default_factory=dict)
    """Lower-cased login -> coderag user."""
    repos: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Lower-cased ``org/name`` -> coderag repository names."""


@dataclass(frozen=True)
class TeamGrant:
    """What a team became: its grants group, the coderag users in it, the repositories it reads,
    and what could not be mapped."""

    team: Team
    group: str
    users: tuple[str, ...]
    without_user: tuple[str, ...]
    """Logins with no coderag token (directly or through the users map): not granted."""
    repos: tuple[str, ...]
    """Names of the coderag repositories registered from the team's repositories."""
    unregistered: tuple[str, ...]
    """The team's repositories no coderag repository was registered from."""


@dataclass(frozen=True)
class Outcome:
    """A sync's result: the grants file's text and what each team became."""

    org: Org
    text: str
    teams: tuple[TeamGrant, ...]
    kept: tuple[str, ...]
    """Groups and grants keys of the base file carried over unchanged."""


# The code host's API ------------------------------------------------------------------------------
def group_name(host: str, team_key: str) -> str:
    """The grants group a team becomes: ``<host>:<org>/<team>``, lower-cased (team names and
    organizations are case-insensitive on the hosts)."""
    return f"{host}:{team_key.lower()}"


def is_synced(key: str, host: str, org_key: str) -> bool:
    """Whether a grants key belongs to the sync of ``org_key`` (replaced by each sync)."""
    prefix = group_name(host, org_key)
    return key == prefix or key.startswith(prefix + "/")


def _url_key(url: str) -> str:
    """A repository URL as ``host/org/name`` for matching: scheme, user, port, ``.git``, a
    trailing slash and the ssh ``git@host:org/name`` form aside, and case-folded (the three
    hosts treat repository paths case-insensitively)."""
    return normalise_url(url).casefold()


def map_teams(
    org: Org, registered: Iterable[Repo], users: Iterable[str], names: NameMap
) -> tuple[TeamGrant, ...]:
    """Each team as a grants group: its logins mapped to coderag users (the users map, else the
    same name) that hold a token, its repositories to every coderag repository registered from
    one of their URLs or named for it in the map."""
    by_url: dict[str, list[str]] = {}
    known: set[str] = set()
    for repo in registered:
        if repo.ref_of:
            continue  # a ref is read with its repository's grant
        known.add(repo.name)
        if repo.url:
            by_url.setdefault(_url_key(repo.url), []).append(repo.name)
    tokens = set(users)
    out = []
    for team in org.teams:
        granted: set[str] = set()
        without: list[str] = []
        for login in team.logins:
            user = names.users.get(login.lower(), login)
            if user in tokens:
                granted.add(user)
            elif login not in without:
                without.append(login)
        repos: set[str] = set()
        unregistered = []
        for host_repo in team.repos:
            found = {n for u in host_repo.urls for n in by_url.get(_url_key(u), ())}
            found |= set(names.repos.get(host_repo.full_name.lower(), ())) & known
            repos |= found
            if not found:
                unregistered.append(host_repo.full_name)
        out.append(
            TeamGrant(
                team,
                group_name(org.host, team.key),
                tuple(sorted(granted)),
                tuple(sorted(without)),
                tuple(sorted(repos)),
                tuple(sorted(unregistered)),
            )
        )
    return tuple(out)


def merge(
    base: Grants, org: Org, teams: Iterable[TeamGrant]
) -> tuple[dict[str, list[str]], dict[str, list[str]], tuple[str, ...]]:
    """(groups, grants, kept keys): the base file's entries, less those of an earlier sync of
    this organization, plus this sync's teams."""
    groups = {k: sorted(v) for k, v in base.groups.items() if not is_synced(k, org.host, org.key)}
    grants = {k: list(v) for k, v in base.patterns.items() if not is_synced(k, org.host, org.key)}
    kept = tuple(sorted(set(groups) | set(grants)))
    for team in teams:
        groups[team.group] = list(team.users)
        grants[team.group] = list(team.repos)
    return groups, grants, kept


def _toml_str(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; DEL must be escaped too)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _toml_str(key)


def render(
    groups: dict[str, list[str]], grants: dict[str, list[str]], suffix: str, org: Org
) -> str:
    """The grants file's text, TOML or JSON by ``suffix``, keys sorted so that a sync that
    changes nothing writes the same bytes."""
    if suffix == ".json":
        body = {"groups": dict(sorted(groups.items())), "grants": dict(sorted(grants.items()))}
        return json.dumps(body, ensure_ascii=False, indent=2) + "\n"
    lines = [
        f"# Written by `coderag grants-sync --host {org.host} --org {org.key}`. Entries named",
        f"# {group_name(org.host, org.key)}/... are replaced by each sync; keep your own in the",
        "# --base file (docs/ACCESS.md, Grants from the code host).",
    ]
    for table, entries in (("groups", groups), ("grants", grants)):
        lines += ["", f"[{table}]"]
        lines += [
            f"{_toml_key(k)} = [{', '.join(_toml_str(v) for v in values)}]"
            for k, values in sorted(entries.items())
        ]
    return "\n".join(lines) + "\n"


def read_name_map(path: Path) -> NameMap:
    """The ``--users`` file: ``[users]`` login = "user", ``[repos]`` "org/name" = ["repo"]."""
    where = f"users map {str(path)!r}"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SyncError(f"{where} cannot be read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SyncError(f"{where} is not valid UTF-8 TOML: {exc}") from None
    if unknown := sorted(set(data) - set(_MAP_TABLES)):
        raise SyncError(f"{where} has a table {unknown[0]!r}; it holds [users] and [repos]")
    users, repos = data.get("users", {}), data.get("repos", {})
    if not isinstance(users, dict) or not all(isinstance(v, str) for v in users.values()):
        raise SyncError(f"{where}: [users] maps a login to one coderag user name")
    if not isinstance(repos, dict):
        raise SyncError(f"{where}: [repos] maps org/name to coderag repository names")
    mapped: dict[str, tuple[str, ...]] = {}
    for key, value in repos.items():
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise SyncError(f"{where}: repos.{key} must be a name or a list of names")
        mapped[key.lower()] = tuple(names)
    return NameMap({k.lower(): v for k, v in users.items()}, mapped)


def checked_copy(text: str, directory: Path, suffix: str) -> Path:
    """``text`` in a new file of ``directory`` that ``read_grants`` accepted; SyncError
    (and no file left) when it would not be."""
    try:
        fd, name = tempfile.mkstemp(dir=directory, prefix=".grants-sync-", suffix=suffix)
    except OSError as exc:
        raise SyncError(f"cannot write in {directory}: {exc.strerror or exc}") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        tmp.chmod(0o644)  # mkstemp's 0600 would hide it from a server run as another user
        read_grants(tmp)
    except GrantsError as exc:
        tmp.unlink(missing_ok=True)
        raise SyncError(f"the synced grants would be refused, nothing was written: {exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def write_grants(path: Path, text: str) -> bool:
    """Put ``text`` at ``path`` whole (a checked copy renamed over it: the server, which reads
    the file again when it changes, never sees half of it); False when it already holds it."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass  # missing or unreadable: replaced
    tmp = checked_copy(text, path.parent, path.suffix)
    try:
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise SyncError(f"cannot replace {path}: {exc.strerror or exc}") from None
    return True


def sync(
    org: Org,
    registered: Iterable[Repo],
    users: Iterable[str],
    names: NameMap,
    base: Grants,
    suffix: str,
) -> Outcome:
    """The grants file for ``org``'s teams over ``base``."""
    teams = map_teams(org, registered, users, names)
    groups, grants, kept = merge(base, org, teams)
    return Outcome(org, render(groups, grants, suffix, org), teams, kept)


# The command -------------------------------------------------------------------------------------


def _access(args: argparse.Namespace) -> HostAccess:
    """The host, its API root and token from the command's arguments and environment."""
    host = args.host
    api_url = (args.api_url or DEFAULT_API.get(host, "")).rstrip("/")
    if not api_url:
        raise SyncError(f"--api-url is required for {host}: e.g. https://git.example.com/api/v1")
    if not api_url.startswith(("https://", "http://")):
        raise SyncError(f"--api-url {api_url!r} must be an http(s) URL")
    if host == "gitea" and not api_url.endswith("/api/v1"):
        api_url += "/api/v1"  # the instance's address is enough: its API lives under /api/v1
    env = args.token_env or DEFAULT_TOKEN_ENV[host]
    token = os.environ.get(env, "").strip()
    if not token:
        raise SyncError(
            f"set {env} to a {host} token with {SCOPES[host]} (or name another variable with "
            "--token-env)"
        )
    return HostAccess(host, api_url, token, env)


def _summary(
    outcome: Outcome, out: Path | None, written: bool | None, base: Path | None
) -> list[str]:
    """The report's lines: each team, who and what it grants, what was left out."""
    org = outcome.org
    matched = {n for t in outcome.teams for n in t.repos}
    lines = [
        f"{org.host} {org.key}: {len(outcome.teams)} teams, "
        f"{len({u for t in outcome.teams for u in t.users})} coderag users, "
        f"{len(matched)} repositories granted"
    ]
    for t in outcome.teams:
        lines.append(
            f"  {t.group}: users {', '.join(t.users) or '-'}; repositories "
            f"{', '.join(t.repos) or '-'}"
        )
        if t.without_user:
            lines.append(f"    no coderag token, not granted: {', '.join(t.without_user)}")
        if t.unregistered:
            lines.append(f"    not registered in coderag: {', '.join(t.unregistered)}")
    if base is not None:
        lines.append(f"kept {len(outcome.kept)} entries of {base}")
    if written is None:
        lines.append(f"dry run: nothing written{f' to {out}' if out else ''}")
    else:
        lines.append(f"wrote {out}" if written else f"{out} already says this: left as it was")
    return lines


def _report(outcome: Outcome, out: Path | None, written: bool | None) -> dict[str, Any]:
    """The report as JSON, for scripts."""
    report: dict[str, Any] = {
        "host": outcome.org.host,
        "org": outcome.org.key,
        "out": str(out) if out else None,
        "written": written,
        "dry_run": written is None,
        "kept": list(outcome.kept),
        "teams": [
            {
                "team": t.team.key,
                "group": t.group,
                "users": list(t.users),
                "without_user": list(t.without_user),
                "repositories": list(t.repos),
                "unregistered": list(t.unregistered),
            }
            for t in outcome.teams
        ],
    }
    if written is None:
        report["file"] = outcome.text
    return report


def run(args: argparse.Namespace, transport: httpx.BaseTransport | None = None) -> int:
    """``coderag grants-sync``: read the teams, write (or with ``--dry-run`` print) the grants
    file and a report; exit status 2 with one line on stderr when it cannot."""
    try:
        return _run(args, transport)
    except CoderagError as exc:
        print(f"error: {' '.join(exc.detail.split())}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, transport: httpx.BaseTransport | None) -> int:
    settings = get_settings()
    out = Path(args.out).expanduser() if args.out else settings.grants
    if out is None and not args.dry_run:
        raise SyncError("name the grants file to write: --out FILE, or set CODERAG_GRANTS")
    suffix = out.suffix.lower() if out else ".toml"
    if suffix not in (".toml", ".json"):
        raise SyncError(f"--out {out} must end in .toml or .json, as CODERAG_GRANTS does")
    users = {p.user for p in settings.principals().values()}
    if not users:
        raise SyncError(
            "CODERAG_API_TOKENS is empty here: set it as the server has it, so that code-host "
            "logins map to its users"
        )
    access = _access(args)
    names = read_name_map(Path(args.users).expanduser()) if args.users else NameMap()
    base_path = Path(args.base).expanduser() if args.base else None
    try:
        base = read_grants(base_path) if base_path else Grants()
    except GrantsError as exc:
        raise SyncError(f"--base: {exc}") from None
    org = read_org(access, args.org.strip("/"), transport)
    outcome = sync(org, get_catalog().list_repos(), users, names, base, suffix)
    written: bool | None = None
    if args.dry_run:
        with tempfile.TemporaryDirectory() as scratch:
            checked_copy(outcome.text, Path(scratch), suffix)  # a dry run shows a usable file
    else:
        assert out is not None
        written = write_grants(out, outcome.text)
    if args.json:
        print(json.dumps(_report(outcome, out, written), ensure_ascii=False, indent=2))
        return 0
    if args.dry_run:
        print(outcome.text)
    print("\n".join(_summary(outcome, out, written, base_path)))
    return 0
