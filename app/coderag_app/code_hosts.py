"""Reading a code host's teams over its REST API (issue 45's grants sync): the teams of a
GitHub or Gitea/Forgejo organization, or the groups under a GitLab group, with their members'
logins and their repositories' clone URLs, page by page, each refusal a ``SyncError`` saying
what to fix."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx

from coderag.errors import CoderagError

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
