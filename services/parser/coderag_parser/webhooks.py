"""Push webhooks from GitHub, GitLab and Gitea: verify, deduplicate, match, queue a reindex.

The handler only reads the catalog and git config files and enqueues jobs; cloning, fetching and
parsing happen in the queued ``index_repo`` job, so the provider gets its 202 in milliseconds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import git
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool

from coderag.deps import CatalogDep, SettingsDep
from coderag.errors import InvalidInput, NotFound, Unauthorized
from coderag.jobs import IndexRepo
from coderag.queue import enqueue, job_alive
from coderag.responses import errors
from coderag.settings import Settings
from coderag.store import Catalog
from coderag.store.repos import Repo
from coderag_parser.gitsync import CLONES_DIR

DELIVERY_TTL = timedelta(days=30)
"""How long a delivery id is remembered; providers redeliver within days, not months."""

URL_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "github": (
        ("repository", "clone_url"),
        ("repository", "ssh_url"),
        ("repository", "html_url"),
        ("repository", "git_url"),
    ),
    "gitlab": (
        ("project", "git_http_url"),
        ("project", "git_ssh_url"),
        ("project", "web_url"),
        ("repository", "url"),
    ),
}
"""Where each provider's push payload names the pushed repository; Gitea mirrors GitHub."""
URL_FIELDS["gitea"] = URL_FIELDS["github"]

_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>.*)$")
_ZERO_SHA = re.compile(r"^0+$")

router = APIRouter(tags=["webhooks"])


def normalise_url(url: str) -> str:
    """``host/path`` of a git URL, equal for its https, ssh, git:// and scp-like forms."""
    url = url.strip()
    if "://" in url:
        parts = urlsplit(url)
        # hostname drops userinfo and port: ssh and https of one forge differ only there
        host, path = parts.hostname or "", unquote(parts.path)
    elif match := _SCP.match(url):
        host, path = match["host"].lower(), match["path"]
    else:
        host, path = "", url
    path = path.rstrip("/").removesuffix(".git").rstrip("/")
    return f"{host}/{path.lstrip('/')}" if host else path


def _secret(settings: Settings) -> bytes:
    if not settings.webhook_secret:
        raise Unauthorized("webhooks are disabled: set CODERAG_WEBHOOK_SECRET on the server")
    return settings.webhook_secret.encode()


def _require_equal(given: str | None, expected: str, header: str) -> None:
    if not given:
        raise Unauthorized(f"missing {header} header; configure the webhook's secret")
    # bytes, because compare_digest rejects non-ASCII str and headers are attacker-controlled
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise Unauthorized(f"{header} does not match CODERAG_WEBHOOK_SECRET")


def _hmac_hex(secret: bytes, body: bytes) -> str:
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


async def _signed_body(request: Request, secret: bytes, header: str, prefix: str = "") -> bytes:
    """The request's body once its ``header`` is known to hold ``prefix`` + the body's
    HMAC-SHA256 under ``secret`` (Unauthorized otherwise): an unsigned request is refused before
    its body is read, and the digest of a body of many megabytes runs in a thread (hashlib lets
    go of the GIL), so the event loop keeps answering meanwhile."""
    given = request.headers.get(header)
    if not given:
        raise Unauthorized(f"missing {header} header; configure the webhook's secret")
    body = await request.body()
    expected = prefix + await run_in_threadpool(_hmac_hex, secret, body)
    _require_equal(given, expected, header)
    return body


def _load(body: bytes, content_type: str) -> dict[str, Any]:
    try:
        if content_type.startswith("application/x-www-form-urlencoded"):
            # GitHub's and Gitea's optional form encoding wraps the JSON in a payload field
            body = parse_qs(body.decode())["payload"][0].encode()
        payload = json.loads(body)
    except (ValueError, KeyError, RecursionError) as exc:
        raise InvalidInput(f"webhook body is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise InvalidInput("webhook body must be a JSON object")
    return payload


def _payload_urls(provider: str, payload: dict[str, Any]) -> list[str]:
    urls = []
    for obj, key in URL_FIELDS[provider]:
        section = payload.get(obj)
        value = section.get(key) if isinstance(section, dict) else None
        if isinstance(value, str) and value.strip():
            urls.append(value)
    return urls


def _default_branch(payload: dict[str, Any]) -> str | None:
    for obj in ("repository", "project"):
        section = payload.get(obj)
        if isinstance(section, dict) and isinstance(section.get("default_branch"), str):
            return section["default_branch"]
    return None


def _local_facts(repo: Repo, data_dir: Path) -> tuple[str | None, str | None]:
    """(normalised origin URL, checked-out branch) read from git config and HEAD, no subprocess."""
    root = Path(repo.path) if repo.path else data_dir / CLONES_DIR / repo.name
    try:
        with git.Repo(root, search_parent_directories=bool(repo.path)) as local:
            try:
                origin = normalise_url(local.remote("origin").url)
            except (ValueError, git.GitError, AttributeError):
                origin = None
            try:
                branch = local.active_branch.name
            except (TypeError, ValueError):  # detached HEAD or unborn branch
                branch = None
            return origin, branch
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None, None


def match_repos(
    catalog: Catalog, settings: Settings, urls: list[str], ref: str, default: str | None
) -> tuple[list[str], str | None]:
    """Names of registered repositories the push to full ref ``ref`` (``refs/heads/x`` or
    ``refs/tags/x``) updates, or none and the reason why. A repository tracks a branch; a ref
    registered by name (``POST /repos/{name}/refs``) is the branch of that name, else the tag,
    so a push to either reindexes it, and its checkout picks the same one as before."""
    wanted = {normalise_url(u) for u in urls} - {""}
    same_repo: list[tuple[str, set[str]]] = []
    for repo in catalog.list_repos():
        origin, checked_out = _local_facts(repo, settings.data_dir)
        # a path repo is known only by its origin remote; a URL repo by its registered URL
        key = origin if repo.path else normalise_url(repo.url or "")
        if key and key in wanted:
            if repo.ref_of:
                tracked = {f"refs/heads/{repo.branch}", f"refs/tags/{repo.branch}"}
            else:
                # an unknown branch (clone not made yet) follows the forge's default branch
                branch = repo.branch or checked_out or default
                tracked = {f"refs/heads/{branch}"} if branch else set()
            same_repo.append((repo.name, tracked))
    if not same_repo:
        shown = urls[0] if urls else "(no repository URL in the payload)"
        return [], f"no registered repository matches {shown}"
    names = [name for name, tracked in same_repo if ref in tracked]
    if not names:
        kind = "tag" if ref.startswith("refs/tags/") else "branch"
        short = ref.removeprefix("refs/heads/").removeprefix("refs/tags/")
        shown = ", ".join(
            f"{n} tracks {' or '.join(sorted(t)) or 'no branch'}" for n, t in same_repo
        )
        return [], f"push to {kind} {short!r} ({ref}) is not tracked ({shown})"
    return names, None


def _record_and_enqueue(
    catalog: Catalog,
    settings: Settings,
    provider: str,
    delivery: str | None,
    body: bytes,
    names: list[str],
) -> bool:
    """Queue the reindexes unless this provider's delivery id or this very body was seen
    through any endpoint (a signed body sent again under another id, with none, or to another
    provider's endpoint, where GitHub's and Gitea's HMACs are the same, is the same push);
    False for a duplicate."""
    now = datetime.now(UTC)

    def queue_all() -> bool:
        for name in names:
            enqueue(IndexRepo(repo=name), settings)
        return True

    # enqueue inside the transaction: a failed enqueue forgets the id so a redelivery works
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    return bool(
        catalog.deliveries.record_then(
            provider,
            delivery,
            now.strftime(stamp),
            (now - DELIVERY_TTL).strftime(stamp),
            queue_all,
            also=[f"body:{hashlib.sha256(body).hexdigest()}"],
        )
    )


def _handle_push(
    provider: str,
    delivery: str | None,
    body: bytes,
    content_type: str,
    settings: Settings,
    catalog: Catalog,
) -> dict[str, Any]:
    payload = _load(body, content_type)
    ref = payload.get("ref")
    if not isinstance(ref, str) or not ref.startswith(("refs/heads/", "refs/tags/")):
        return {"status": "ignored", "reason": f"ref {ref!r} is not a branch or tag"}
    # a tag is tracked only where it was registered as a ref (POST /repos/{name}/refs)
    short = ref.removeprefix("refs/heads/").removeprefix("refs/tags/")
    after = payload.get("after")
    if payload.get("deleted") is True or (isinstance(after, str) and _ZERO_SHA.match(after)):
        kind = "tag" if ref.startswith("refs/tags/") else "branch"
        return {"status": "ignored", "reason": f"{kind} {short!r} was deleted"}
    urls = _payload_urls(provider, payload)
    names, reason = match_repos(catalog, settings, urls, ref, _default_branch(payload))
    if reason:
        # not recorded: a redelivery after the repository is registered should still index it
        return {"status": "ignored", "reason": reason}
    if not _record_and_enqueue(catalog, settings, provider, delivery, body, names):
        # a redelivery is a duplicate only while its push is indexed or queued: one whose job
        # Redis lost (a restart without its append-only file) is queued again
        lost = [n for n in names if _push_lost(catalog, settings, n, after)]
        if not lost:
            return {"status": "duplicate", "delivery": delivery}
        for name in lost:
            enqueue(IndexRepo(repo=name), settings)
        return {"status": "queued", "repos": lost, "delivery": delivery}
    return {"status": "queued", "repos": names, "delivery": delivery}


def _push_lost(catalog: Catalog, settings: Settings, name: str, after: object) -> bool:
    """Whether the push to ``after`` is neither indexed nor waiting in a queue (in-process
    jobs are never lost while the process that queued them lives)."""
    if not settings.redis_url:
        return False
    try:
        repo = catalog.get_repo(name)
    except NotFound:
        return False
    if isinstance(after, str) and repo.commit == after:
        return False
    return repo.status not in ("queued", "indexing") and not job_alive(name, settings)


async def _dispatch(
    provider: str,
    content_type: str,
    body: bytes,
    event: str | None,
    push_event: str,
    delivery: str | None,
    settings: Settings,
    catalog: Catalog,
) -> dict[str, Any]:
    if event == "ping":
        return {"status": "pong"}
    if event != push_event:
        return {"status": "ignored", "reason": f"event {event!r} is not {push_event!r}"}
    # SQLite and git config reads block; keep them off the event loop
    return await run_in_threadpool(
        _handle_push, provider, delivery, body, content_type, settings, catalog
    )


@router.post("/webhooks/github", status_code=202, responses=errors(400))
async def github(request: Request, settings: SettingsDep, catalog: CatalogDep) -> dict[str, Any]:
    """A GitHub webhook signed with X-Hub-Signature-256."""
    body = await _signed_body(request, _secret(settings), "X-Hub-Signature-256", "sha256=")
    h = request.headers
    event, delivery = h.get("x-github-event"), h.get("x-github-delivery")
    ctype = h.get("content-type", "")
    return await _dispatch("github", ctype, body, event, "push", delivery, settings, catalog)


@router.post("/webhooks/gitlab", status_code=202, responses=errors(400))
async def gitlab(request: Request, settings: SettingsDep, catalog: CatalogDep) -> dict[str, Any]:
    """A GitLab webhook carrying the secret in X-Gitlab-Token."""
    secret = _secret(settings).decode()
    _require_equal(request.headers.get("x-gitlab-token"), secret, "X-Gitlab-Token")
    body = await request.body()
    h = request.headers
    # Idempotency-Key is the id GitLab keeps across retries; older GitLab sends only the UUID
    delivery = h.get("idempotency-key") or h.get("x-gitlab-event-uuid")
    event, ctype = h.get("x-gitlab-event"), h.get("content-type", "")
    return await _dispatch("gitlab", ctype, body, event, "Push Hook", delivery, settings, catalog)


@router.post("/webhooks/gitea", status_code=202, responses=errors(400))
async def gitea(request: Request, settings: SettingsDep, catalog: CatalogDep) -> dict[str, Any]:
    """A Gitea webhook signed with X-Gitea-Signature."""
    body = await _signed_body(request, _secret(settings), "X-Gitea-Signature")
    h = request.headers
    event, delivery = h.get("x-gitea-event"), h.get("x-gitea-delivery")
    ctype = h.get("content-type", "")
    return await _dispatch("gitea", ctype, body, event, "push", delivery, settings, catalog)
