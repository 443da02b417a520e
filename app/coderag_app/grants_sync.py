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
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from coderag.auth import Grants, GrantsError, read_grants
from coderag.errors import CoderagError
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag.store.repos import Repo
from coderag_parser.webhooks import normalise_url

HOSTS = ("github", "gitlab", "gitea")
"""The code hosts a sync reads (Forgejo answers Gitea's API)."""

DEFAULT_API = {"github": "https://api.github.com", "gitlab": "https://gitlab.com/api/v4"}
"""API roots used without ``--api-url``; a Gitea or Forgejo has none (it is always self-hosted)."""

DEFAULT_TOKEN_ENV = {"github": "GITHUB_TOKEN", "gitlab": "GITLAB_TOKEN", "gitea": "GITEA_TOKEN"}
"""The environment variable holding the token, without ``--token-env``."""

SCOPES = {
    "github": "the read:org scope, and repo for private repositories (a fine-grained token: "
    "organization Members and repository Metadata, read)",
    "gitlab": "the read_api scope",
    "gitea": "the read:organization and read:repository scopes",
}
"""What a token needs to list teams, their members and repositories, for a 403's message."""

PAGE_SIZE = {"github": 100, "gitlab": 100, "gitea": 50}
"""Items asked per page: each host's documented maximum (Gitea's default MAX_RESPONSE_ITEMS)."""

MAX_PAGES = 500
"""Pages read of one listing before the sync stops: a host that always names a next page would
otherwise keep it busy for ever."""

TIMEOUT_S = 30.0
"""Seconds one request may take."""

_NEXT = re.compile(r'<([^>]*)>\s*;[^,]*\brel="?next"?', re.IGNORECASE)
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_MAP_TABLES = ("users", "repos")


class SyncError(CoderagError):
    """A sync that cannot go on; the message says what to fix, in one line."""


@dataclass(frozen=True)
class HostRepo:
    """A repository a team reads, as the code host names it."""

    full_name: str
    """Its path on the host, ``org/name`` (GitLab: ``group/subgroup/name``)."""
    urls: tuple[str, ...]
    """Its clone URLs (https, ssh) and web address."""


@dataclass(frozen=True)
class Team:
    """A code-host team: the logins in it and the repositories it reads."""

    key: str
    """Its path on the host: ``org/slug`` (GitLab: the group's full path)."""
    name: str
    logins: tuple[str, ...]
    repos: tuple[HostRepo, ...]


@dataclass(frozen=True)
class Org:
    """An organization (a GitLab top group) and its teams, as read from the host."""

    host: str
    key: str
    """Its name as the host spells it, the prefix of its teams' keys."""
    teams: tuple[Team, ...]


@dataclass(frozen=True)
class HostAccess:
    """Where a code host's API answers and the token it is read with."""

    host: str
    api_url: str
    token: str = field(repr=False)
    token_env: str
    """The environment variable the token came from, named in every refusal."""


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


def _when(headers: httpx.Headers) -> str | None:
    """When a rate-limited token may ask again, in words; None when the answer is no rate
    limit (GitHub's ``x-ratelimit-*``, GitLab's ``ratelimit-*``, anyone's ``retry-after``)."""
    retry = headers.get("retry-after", "").strip()
    if retry.isdigit():
        at = datetime.now(UTC) + timedelta(seconds=int(retry))
        return f"for {int(retry)} s (until {at:%Y-%m-%d %H:%M:%S} UTC)"
    if retry:
        try:
            return f"until {parsedate_to_datetime(retry).astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        except (TypeError, ValueError):
            return f"until {retry}"
    remaining = headers.get("x-ratelimit-remaining", headers.get("ratelimit-remaining"))
    if remaining is None or remaining.strip() != "0":
        return None
    reset = headers.get("x-ratelimit-reset", headers.get("ratelimit-reset", "")).strip()
    if not reset.isdigit():
        return "until the limit resets (the host gave no time)"
    return f"until {datetime.fromtimestamp(int(reset), UTC):%Y-%m-%d %H:%M:%S} UTC"


class HostClient:
    """Reads JSON from a code host's API with its token: every page of a listing, and each
    refusal turned into a SyncError saying what to fix."""

    def __init__(
        self, access: HostAccess, org: str, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.access = access
        self.org = org
        auth = {
            "github": {
                "Authorization": f"Bearer {access.token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
            },
            "gitlab": {"PRIVATE-TOKEN": access.token},
            "gitea": {"Authorization": f"token {access.token}"},
        }[access.host]
        # no redirects: a token header such as PRIVATE-TOKEN would follow one to any host
        self.http = httpx.Client(
            base_url=access.api_url.rstrip("/") + "/",
            headers=auth,
            transport=transport,
            timeout=TIMEOUT_S,
            follow_redirects=False,
        )

    def close(self) -> None:
        """Close the connections."""
        self.http.close()

    def get(self, path: str, params: dict[str, str] | None = None) -> dict[str, Any]:
        """The JSON object at ``path``."""
        url = self.http.build_request("GET", path.lstrip("/"), params=params).url
        response = self._send(url, path)
        body = self._json(response, path)
        if not isinstance(body, dict):
            raise SyncError(f"{self.access.host} answered GET {path} with no JSON object")
        return body

    def listing(self, path: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Every item of the JSON list at ``path``, page after page."""
        size = str(PAGE_SIZE[self.access.host])
        per_page = {"gitea": "limit"}.get(self.access.host, "per_page")
        query = {**(params or {}), per_page: size}
        url = self.http.build_request("GET", path.lstrip("/"), params=query).url
        seen: set[str] = set()
        items: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            if str(url) in seen:
                raise SyncError(
                    f"{self.access.host} pagination loop: the next page of {path} is {url}, "
                    "read already"
                )
            seen.add(str(url))
            response = self._send(url, path)
            page = self._json(response, path)
            if not isinstance(page, list) or not all(isinstance(i, dict) for i in page):
                raise SyncError(f"{self.access.host} answered GET {path} with no list of objects")
            items += page
            next_url = self._next(response, url, len(page), len(items))
            if next_url is None:
                return items
            url = next_url
        raise SyncError(
            f"{self.access.host} names a next page of {path} after {MAX_PAGES} pages; "
            "stopped (a pagination loop?)"
        )

    def _next(
        self, response: httpx.Response, url: httpx.URL, got: int, so_far: int
    ) -> httpx.URL | None:
        """The next page's URL: GitLab's ``x-next-page``, else a ``Link: <...>; rel="next"``,
        else (Gitea's team listings set no Link) the page after this one while
        ``x-total-count`` says more remain."""
        headers = response.headers
        if self.access.host == "gitlab" and "x-next-page" in headers:
            page = headers["x-next-page"].strip()
            if not page:
                return None
            if not page.isdigit():
                raise SyncError(f"gitlab answered x-next-page {page!r}, which is no page number")
            return url.copy_set_param("page", page)
        if match := _NEXT.search(headers.get("link", "")):
            target = url.join(match.group(1))
            base = self.http.base_url
            if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
                raise SyncError(
                    f"{self.access.host} names the next page of {url.path} on another host "
                    f"({target.scheme}://{target.host}); the token is not sent there"
                )
            return target
        total = headers.get("x-total-count", "").strip()
        if self.access.host == "gitea" and got and total.isdigit() and so_far < int(total):
            page = url.params.get("page", "1")
            return url.copy_set_param("page", str(int(page) + 1 if page.isdigit() else 2))
        return None

    def _send(self, url: httpx.URL, path: str) -> httpx.Response:
        """The response to GET ``url``; SyncError for a host out of reach or a refusal."""
        host = self.access.host
        try:
            response = self.http.get(url)
        except httpx.TimeoutException:
            raise SyncError(
                f"{host} at {self.access.api_url} did not answer GET {path} within "
                f"{TIMEOUT_S:.0f} s"
            ) from None
        except httpx.TransportError as exc:
            raise SyncError(f"cannot reach {host} at {self.access.api_url}: {exc}") from None
        if response.is_success:
            return response
        raise SyncError(self._refusal(response, path))

    def _refusal(self, response: httpx.Response, path: str) -> str:
        """What a non-2xx answer means and what to do about it."""
        host, env, status = self.access.host, self.access.token_env, response.status_code
        if status in (403, 429) and (when := _when(response.headers)) is not None:
            return f"{host} rate limit reached for the token in {env}: no requests {when}"
        if status == 429:
            return f"{host} rate limit reached for the token in {env} (429, no time given)"
        if status == 401:
            return (
                f"{host} refused the token in {env} (401 for GET {path}): it is wrong, expired "
                "or revoked"
            )
        if status == 403:
            return (
                f"{host} does not let the token in {env} read {path} (403): it needs {SCOPES[host]}"
            )
        if status == 404:
            noun = "group" if host == "gitlab" else "organization"
            return (
                f"{host} has no {noun} {self.org!r} the token in {env} can see (404 for GET "
                f"{path}); check --org and --api-url"
            )
        if 300 <= status < 400:
            where = response.headers.get("location", "elsewhere")
            return f"{host} moved GET {path} to {where} ({status}); check --org and --api-url"
        return f"{host} answered {status} to GET {path}"

    def _json(self, response: httpx.Response, path: str) -> Any:
        """The response's JSON body; SyncError when it is none (a wrong ``--api-url`` answers
        a web page)."""
        try:
            return response.json()
        except ValueError:
            kind = response.headers.get("content-type", "no content type")
            raise SyncError(
                f"{self.access.host} answered GET {path} with a body that is not JSON ({kind}); "
                f"is --api-url {self.access.api_url} the API's root?"
            ) from None


def _text(item: dict[str, Any], key: str, where: str) -> str:
    """A string field of an API object; SyncError naming it when it is missing."""
    value = item.get(key)
    if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
        raise SyncError(f"{where}: an item has no {key!r}")
    return str(value)


def _urls(item: dict[str, Any], keys: Iterable[str]) -> tuple[str, ...]:
    """The URL fields of a repository object that are present."""
    return tuple(v for k in keys if isinstance(v := item.get(k), str) and v)


def _seg(value: str) -> str:
    """A path segment with every reserved character quoted (a GitLab path's ``/`` too)."""
    return quote(value, safe="")


def read_github(client: HostClient, org: str) -> Org:
    """An organization's teams (``GET /orgs/{org}/teams``), each with its members (which
    include the members of its child teams) and repositories."""
    teams = []
    for item in client.listing(f"/orgs/{_seg(org)}/teams"):
        slug = _text(item, "slug", f"github teams of {org}")
        base = f"/orgs/{_seg(org)}/teams/{_seg(slug)}"
        logins = tuple(
            _text(m, "login", f"github {base}/members") for m in client.listing(f"{base}/members")
        )
        repos = tuple(
            HostRepo(
                _text(r, "full_name", f"github {base}/repos"),
                _urls(r, ("clone_url", "ssh_url", "html_url")),
            )
            for r in client.listing(f"{base}/repos")
        )
        teams.append(Team(f"{org}/{slug}", str(item.get("name") or slug), logins, repos))
    return Org("github", org, tuple(teams))


def read_gitlab(client: HostClient, org: str) -> Org:
    """A group and each of its descendant groups as teams: a group's members (``members/all``:
    its own and those inherited from its ancestors, active ones only) read its own projects
    and the projects shared with it, as GitLab lets them."""
    top = client.get(f"/groups/{_seg(org)}", {"with_projects": "false"})
    groups = [top, *client.listing(f"/groups/{_text(top, 'id', 'gitlab group')}/descendant_groups")]
    teams = []
    for group in groups:
        gid, path = _text(group, "id", "gitlab group"), _text(group, "full_path", "gitlab group")
        members = client.listing(f"/groups/{gid}/members/all")
        logins = tuple(
            _text(m, "username", f"gitlab group {path} members")
            for m in members
            if m.get("state", "active") == "active"  # a blocked user cannot read it either
        )
        repos = tuple(
            HostRepo(
                _text(p, "path_with_namespace", f"gitlab group {path} projects"),
                _urls(p, ("http_url_to_repo", "ssh_url_to_repo", "web_url")),
            )
            for p in client.listing(f"/groups/{gid}/projects")
        )
        teams.append(Team(path, str(group.get("name") or path), logins, repos))
    return Org("gitlab", _text(top, "full_path", "gitlab group"), tuple(teams))


def read_gitea(client: HostClient, org: str) -> Org:
    """An organization's teams (``GET /orgs/{org}/teams``), each with its members and
    repositories (``GET /teams/{id}/members``, ``/repos``)."""
    teams = []
    for item in client.listing(f"/orgs/{_seg(org)}/teams"):
        tid, name = _text(item, "id", f"gitea teams of {org}"), _text(item, "name", "gitea team")
        where = f"gitea team {name}"
        logins = tuple(_text(m, "login", where) for m in client.listing(f"/teams/{tid}/members"))
        repos = tuple(
            HostRepo(_text(r, "full_name", where), _urls(r, ("clone_url", "ssh_url", "html_url")))
            for r in client.listing(f"/teams/{tid}/repos")
        )
        teams.append(Team(f"{org}/{name}", name, logins, repos))
    return Org("gitea", org, tuple(teams))


READERS = {"github": read_github, "gitlab": read_gitlab, "gitea": read_gitea}
"""Each host's way of reading an organization's teams."""


def read_org(access: HostAccess, org: str, transport: httpx.BaseTransport | None = None) -> Org:
    """The teams of ``org`` on the code host ``access`` names."""
    client = HostClient(access, org, transport)
    try:
        return READERS[access.host](client, org)
    finally:
        client.close()


# From teams to grants ----------------------------------------------------------------------------


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
