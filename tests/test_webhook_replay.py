"""A captured webhook delivery replayed through another provider's endpoint: GitHub and Gitea sign
a body with the same HMAC-SHA256 of one secret (GitHub prefixes ``sha256=``), so a GitHub
delivery re-sent to ``/webhooks/gitea`` verifies; it is answered as the duplicate it is, as the
same provider answers a redelivery, and queues nothing. Real HMACs against the real parser
service, a real git repository and the real queue."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from pathlib import Path

import git
from fastapi.testclient import TestClient

from coderag import queue
from coderag.store import get_catalog
from tests.conftest import commit_all
from tests.test_webhooks import SECRET, parser_client, secret

__all__ = ["parser_client", "secret"]  # the fixtures this module uses from test_webhooks


def registered(tmp_path: Path) -> str:
    """A path repository on branch main whose origin is example.com/acme/shop, registered; the
    URL a push names it by."""
    root = tmp_path / "shop"
    repo = git.Repo.init(root, initial_branch="main")
    (root / "a.py").write_text("def a():\n    return 1\n")
    commit_all(repo, "one")
    repo.create_remote("origin", "https://example.com/acme/shop.git")
    get_catalog().create_repo("shop", str(root), None, None)
    return "https://example.com/acme/shop"


def push_body(url: str, sha: str) -> bytes:
    """A push to main naming the repository as GitHub, Gitea and GitLab payloads do."""
    payload = {
        "ref": "refs/heads/main",
        "after": sha,
        "repository": {"clone_url": url, "url": url},
        "project": {"git_http_url": url},
    }
    return json.dumps(payload).encode()


def digest(body: bytes) -> str:
    """The HMAC-SHA256 of ``body`` under the shared secret, as hex."""
    return hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def send(client: TestClient, provider: str, body: bytes, delivery: str) -> tuple[int, dict]:
    """``body`` posted to ``provider``'s endpoint, signed as that provider signs; the status and
    the answer."""
    headers = {
        "github": {
            "X-Hub-Signature-256": "sha256=" + digest(body),
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": delivery,
        },
        "gitea": {
            "X-Gitea-Signature": digest(body),
            "X-Gitea-Event": "push",
            "X-Gitea-Delivery": delivery,
        },
        "gitlab": {
            "X-Gitlab-Token": SECRET,
            "X-Gitlab-Event": "Push Hook",
            "Idempotency-Key": delivery,
        },
    }[provider]
    r = client.post(
        f"/webhooks/{provider}",
        content=body,
        headers={**headers, "Content-Type": "application/json"},
    )
    return r.status_code, r.json()


def test_a_delivery_replayed_through_another_providers_endpoint_is_a_duplicate(
    parser_client: TestClient, secret: str, tmp_path: Path
) -> None:
    url = registered(tmp_path)
    captured = push_body(url, "a" * 40)
    assert send(parser_client, "github", captured, "gh-1") == (
        202,
        {"status": "queued", "repos": ["shop"], "delivery": "gh-1"},
    )
    queue.drain()
    # the same bytes and the same HMAC through Gitea's endpoint, under a fresh delivery id
    assert send(parser_client, "gitea", captured, "replayed") == (
        202,
        {"status": "duplicate", "delivery": "replayed"},
    )
    # and through GitLab's, whose shared token the body's signer knows as well
    assert send(parser_client, "gitlab", captured, "replayed-too") == (
        202,
        {"status": "duplicate", "delivery": "replayed-too"},
    )
    # the other way round: a Gitea delivery re-sent to GitHub's endpoint
    from_gitea = push_body(url, "b" * 40)
    assert send(parser_client, "gitea", from_gitea, "gt-1")[1]["status"] == "queued"
    queue.drain()
    assert send(parser_client, "github", from_gitea, "gh-2") == (
        202,
        {"status": "duplicate", "delivery": "gh-2"},
    )
    # a new push is queued through any endpoint; a delivery id stays its provider's, so GitHub's
    # id under another provider does not make a new body a duplicate
    for provider, sha in (("gitea", "c"), ("gitlab", "d")):
        assert send(parser_client, provider, push_body(url, sha * 40), "gh-1") == (
            202,
            {"status": "queued", "repos": ["shop"], "delivery": "gh-1"},
        )
        queue.drain()
    assert send(parser_client, "github", push_body(url, "e" * 40), "gh-3")[1]["status"] == "queued"
    queue.drain()


def test_a_body_recorded_under_its_provider_before_the_upgrade_is_still_a_duplicate_there(
    parser_client: TestClient, secret: str, tmp_path: Path
) -> None:
    """Content keys were once recorded under the endpoint's provider; such a row, still within
    the TTL, keeps a redelivery of its body to that endpoint a duplicate."""
    url = registered(tmp_path)
    body = push_body(url, "f" * 40)
    key = f"body:{hashlib.sha256(body).hexdigest()}"
    get_catalog().db.write(
        lambda tx: tx.execute(
            "INSERT INTO webhook_deliveries (provider, delivery, received_at) "
            "VALUES ('github', :key, :now)",
            {"key": key, "now": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
        )
    )
    assert send(parser_client, "github", body, "after-upgrade") == (
        202,
        {"status": "duplicate", "delivery": "after-upgrade"},
    )
