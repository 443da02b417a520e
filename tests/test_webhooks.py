"""Push webhooks over HTTP with real git remotes, the real queue and the real index pipeline."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient

from coderag import queue
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_app.server import create_app
from coderag_parser.webhooks import normalise_url
from tests.conftest import commit_all, wait_ready

SECRET = "It's a Secret to Everybody"
GITHUB_VECTOR = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CODERAG_WEBHOOK_SECRET", SECRET)
    get_settings.cache_clear()
    return SECRET


@pytest.fixture
def parser_client() -> Iterator[TestClient]:
    """The parser service alone: enough to verify, match and enqueue."""
    with TestClient(create_app(("coderag_parser",))) as c:
        yield c


@pytest.fixture
def client() -> Iterator[TestClient]:
    """The all-in-one app with real models, for indexing and searching."""
    with TestClient(create_app()) as c:
        yield c


def github_sig(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github_push(
    client: TestClient, payload: dict, delivery: str | None = None, event: str = "push"
) -> tuple[int, dict, float]:
    """Send a signed GitHub event; returns status, body and the seconds the handler took."""
    body = json.dumps(payload).encode()
    headers = {
        "X-Hub-Signature-256": github_sig(body),
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "Content-Type": "application/json",
    }
    start = time.perf_counter()
    r = client.post("/webhooks/github", content=body, headers=headers)
    return r.status_code, r.json(), time.perf_counter() - start


def push_payload(url: str, branch: str = "main", sha: str = "a" * 40) -> dict:
    return {"ref": f"refs/heads/{branch}", "after": sha, "repository": {"clone_url": url}}


def generation(name: str) -> int:
    return get_catalog().db.read("SELECT generation FROM repos WHERE name=:n", {"n": name})[0][0]


def test_github_documented_test_vector(parser_client: TestClient, secret: str) -> None:
    body = b"Hello, World!"
    assert github_sig(body) == GITHUB_VECTOR
    headers = {"X-Hub-Signature-256": GITHUB_VECTOR, "X-GitHub-Delivery": "d1"}
    r = parser_client.post(
        "/webhooks/github", content=body, headers={**headers, "X-GitHub-Event": "ping"}
    )
    assert r.status_code == 202 and r.json() == {"status": "pong"}
    # the signature is right, so a push with this non-JSON body is a 400, not a 401
    r = parser_client.post(
        "/webhooks/github", content=body, headers={**headers, "X-GitHub-Event": "push"}
    )
    assert r.status_code == 400 and "JSON" in r.json()["detail"]
    tampered = GITHUB_VECTOR[:-1] + "f"
    r = parser_client.post(
        "/webhooks/github",
        content=body,
        headers={"X-Hub-Signature-256": tampered, "X-GitHub-Event": "ping"},
    )
    assert r.status_code == 401 and "X-Hub-Signature-256" in r.json()["detail"]


def test_github_rejects_missing_signature_and_other_secret(
    parser_client: TestClient, secret: str
) -> None:
    body = json.dumps(push_payload("https://github.com/a/b")).encode()
    r = parser_client.post("/webhooks/github", content=body, headers={"X-GitHub-Event": "push"})
    assert r.status_code == 401 and "missing X-Hub-Signature-256" in r.json()["detail"]
    headers = {"X-GitHub-Event": "push", "X-Hub-Signature-256": github_sig(body, "other")}
    r = parser_client.post("/webhooks/github", content=body, headers=headers)
    assert r.status_code == 401
    headers["X-Hub-Signature-256"] = b"sha256=\xfc"  # non-ASCII must not crash the comparison
    r = parser_client.post("/webhooks/github", content=body, headers=headers)
    assert r.status_code == 401


def test_unset_secret_is_401_for_every_provider(parser_client: TestClient) -> None:
    for provider in ("github", "gitlab", "gitea"):
        r = parser_client.post(f"/webhooks/{provider}", content=b"{}")
        assert r.status_code == 401, provider
        assert "CODERAG_WEBHOOK_SECRET" in r.json()["detail"]


def test_events_other_than_push(parser_client: TestClient, secret: str) -> None:
    status, body, _ = github_push(parser_client, {"zen": "hi"}, event="ping")
    assert (status, body) == (202, {"status": "pong"})
    status, body, _ = github_push(parser_client, {}, event="issues")
    assert status == 202 and body["status"] == "ignored"
    status, body, _ = github_push(parser_client, {"ref": "refs/pull/1/head"})
    assert status == 202 and body["status"] == "ignored" and "not a branch" in body["reason"]
    status, body, _ = github_push(parser_client, {"ref": "refs/tags/v1"})  # no ref registers it
    assert status == 202 and body["status"] == "ignored" and "no registered" in body["reason"]
    status, body, _ = github_push(parser_client, [1, 2])  # type: ignore[arg-type]
    assert status == 400 and "JSON object" in body["detail"]


def test_gitlab_token(parser_client: TestClient, secret: str) -> None:
    payload = {
        "ref": "refs/heads/main",
        "project": {"git_http_url": "https://gitlab.example.com/g/p.git"},
    }
    headers = {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Event-UUID": "u1"}
    r = parser_client.post(
        "/webhooks/gitlab", json=payload, headers={**headers, "X-Gitlab-Token": SECRET}
    )
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "ignored" and "no registered repository" in r.json()["reason"]
    r = parser_client.post("/webhooks/gitlab", json=payload, headers=headers)
    assert r.status_code == 401 and "missing X-Gitlab-Token" in r.json()["detail"]
    wrong = {**headers, "X-Gitlab-Token": SECRET.upper()}
    r = parser_client.post("/webhooks/gitlab", json=payload, headers=wrong)
    assert r.status_code == 401 and "does not match" in r.json()["detail"]
    r = parser_client.post(
        "/webhooks/gitlab", content=b"{nope", headers={**headers, "X-Gitlab-Token": SECRET}
    )
    assert r.status_code == 400


def test_gitea_signature(parser_client: TestClient, secret: str) -> None:
    body = json.dumps(push_payload("https://gitea.example.com/o/r.git")).encode()
    good = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {"X-Gitea-Event": "push", "X-Gitea-Delivery": "g1"}
    r = parser_client.post(
        "/webhooks/gitea", content=body, headers={**headers, "X-Gitea-Signature": good}
    )
    assert r.status_code == 202 and r.json()["status"] == "ignored", r.text
    r = parser_client.post(
        "/webhooks/gitea", content=body, headers={**headers, "X-Gitea-Signature": "sha256=" + good}
    )
    assert r.status_code == 401  # Gitea's signature has no prefix
    r = parser_client.post("/webhooks/gitea", content=body, headers=headers)
    assert r.status_code == 401
    bad = b"not json"
    sig = hmac.new(SECRET.encode(), bad, hashlib.sha256).hexdigest()
    r = parser_client.post(
        "/webhooks/gitea", content=bad, headers={**headers, "X-Gitea-Signature": sig}
    )
    assert r.status_code == 400


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/Acme/shop.git",
        "https://user:tok@GitHub.com/Acme/shop/",
        "http://github.com:443/Acme/shop",
        "ssh://git@github.com:22/Acme/shop.git",
        "git@github.com:Acme/shop.git",
        "git://github.com/Acme/shop.git",
    ],
)
def test_normalise_url_forms_agree(url: str) -> None:
    assert normalise_url(url) == "github.com/Acme/shop"


def test_normalise_file_url() -> None:
    assert normalise_url("file:///tmp/x/remote.git/") == "/tmp/x/remote"
    assert normalise_url("https://github.com/acme/shop") != normalise_url(
        "https://github.com/acme/shopx"
    )


def test_path_repo_matches_by_origin_only(
    parser_client: TestClient, secret: str, tmp_path: Path
) -> None:
    with_origin = tmp_path / "with-origin"
    local = git.Repo.init(with_origin)
    local.git.symbolic_ref("HEAD", "refs/heads/trunk")
    (with_origin / "a.py").write_text("def a():\n    return 1\n")
    commit_all(local, "one")
    local.create_remote("origin", "git@GitHub.com:Acme/Shop.git")
    no_origin = tmp_path / "no-origin"
    bare_local = git.Repo.init(no_origin)
    (no_origin / "b.py").write_text("def b():\n    return 2\n")
    commit_all(bare_local, "one")
    catalog = get_catalog()
    catalog.create_repo("withorigin", str(with_origin), None, None)
    catalog.create_repo("noorigin", str(no_origin), None, None)

    payload = {
        "ref": "refs/heads/trunk",
        "repository": {
            "clone_url": "https://github.com/Acme/Shop.git",
            "ssh_url": "git@github.com:Acme/Shop.git",
            "html_url": "https://github.com/Acme/Shop",
        },
    }
    status, body, _ = github_push(parser_client, payload)
    assert status == 202 and body["status"] == "queued" and body["repos"] == ["withorigin"]
    # the branch of a path repository is the one checked out there
    status, body, _ = github_push(parser_client, {**payload, "ref": "refs/heads/main"})
    assert body["status"] == "ignored" and "branch" in body["reason"]
    status, body, _ = github_push(parser_client, {**payload, "after": "0" * 40})
    assert body["status"] == "ignored" and "deleted" in body["reason"]
    queue.drain()


def test_concurrent_redeliveries_enqueue_once(
    parser_client: TestClient, secret: str, tmp_path: Path
) -> None:
    root = tmp_path / "work"
    repo = git.Repo.init(root)
    (root / "a.py").write_text("def a():\n    return 1\n")
    commit_all(repo, "one")
    repo.create_remote("origin", "https://example.com/o/r.git")
    get_catalog().create_repo("r", str(root), None, repo.active_branch.name)
    payload = push_payload("https://example.com/o/r", repo.active_branch.name)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: github_push(parser_client, payload, "same-id"), range(8)))
    statuses = sorted(body["status"] for _, body, _ in results)
    assert statuses == ["duplicate"] * 7 + ["queued"], results
    queue.drain()


def _origin_repo(tmp_path: Path, name: str = "shop") -> str:
    """A path repository on branch main whose origin is example.com/acme/<name>, registered."""
    root = tmp_path / name
    repo = git.Repo.init(root, initial_branch="main")
    (root / "a.py").write_text("def a():\n    return 1\n")
    commit_all(repo, "one")
    repo.create_remote("origin", f"https://example.com/acme/{name}.git")
    get_catalog().create_repo(name, str(root), None, None)
    return f"https://example.com/acme/{name}"


def test_a_tag_push_never_reindexes_the_branch_of_that_name(
    parser_client: TestClient, secret: str, tmp_path: Path
) -> None:
    url = _origin_repo(tmp_path)
    tag = {"ref": "refs/tags/main", "after": "b" * 40, "repository": {"clone_url": url}}
    status, body, _ = github_push(parser_client, tag)
    assert status == 202 and body["status"] == "ignored", body
    assert "tag 'main'" in body["reason"] and "refs/heads/main" in body["reason"], body
    status, body, _ = github_push(parser_client, push_payload(url, "main", "c" * 40))
    assert body == {"status": "queued", "repos": ["shop"], "delivery": body["delivery"]}, body
    queue.drain()


def test_a_signed_body_is_queued_once_under_any_delivery_id_or_none(
    parser_client: TestClient, secret: str, tmp_path: Path
) -> None:
    url = _origin_repo(tmp_path)
    payload = push_payload(url, "main", "d" * 40)
    status, body, _ = github_push(parser_client, payload, "first-id")
    assert body["status"] == "queued", body
    status, body, _ = github_push(parser_client, payload, "another-id")
    assert (status, body) == (202, {"status": "duplicate", "delivery": "another-id"})
    raw = json.dumps(payload).encode()
    headers = {
        "X-Hub-Signature-256": github_sig(raw),
        "X-GitHub-Event": "push",
        "Content-Type": "application/json",
    }
    r = parser_client.post("/webhooks/github", content=raw, headers=headers)  # no delivery id
    assert r.json() == {"status": "duplicate", "delivery": None}, r.text
    # another push (another body) is queued
    status, body, _ = github_push(parser_client, push_payload(url, "main", "e" * 40))
    assert body["status"] == "queued", body
    queue.drain()


def make_remote(tmp_path: Path) -> tuple[git.Repo, str]:
    """A bare 'remote' on branch main and a working clone that pushes to it."""
    bare = tmp_path / "remote.git"
    git.Repo.init(bare, bare=True).git.symbolic_ref("HEAD", "refs/heads/main")
    work = git.Repo.init(tmp_path / "work")
    work.git.symbolic_ref("HEAD", "refs/heads/main")
    (tmp_path / "work" / "payments.py").write_text(
        'def charge_card(amount: int) -> str:\n    """Charge a card."""\n    return "ok"\n'
    )
    commit_all(work, "charge")
    work.create_remote("origin", str(bare))
    work.git.push("origin", "main")
    return work, bare.as_uri()


@pytest.mark.slow
def test_push_reindexes_in_background(
    client: TestClient, secret: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODERAG_URL_SCHEMES", "https,file")  # the 'remote' is a local bare repo
    get_settings.cache_clear()
    work, url = make_remote(tmp_path)
    r = client.post("/repos", json={"name": "shop", "url": url, "branch": "main"})
    assert r.status_code == 202, r.text
    assert wait_ready(client, "shop")["status"] == "ready"
    before = generation("shop")
    per_chain = 2  # one chain publishes twice: its keyword stage, then its vectors (complete)

    (Path(work.working_dir) / "payments.py").write_text(
        'def charge_card(amount: int) -> str:\n    """Charge a card."""\n    return "ok"\n\n\n'
        "def refund_payment(payment_id: str, amount: int) -> bool:\n"
        '    """Refund a captured payment, fully or in part."""\n'
        "    return amount > 0\n"
    )
    sha = commit_all(work, "refund")
    work.git.push("origin", "main")

    delivery = str(uuid.uuid4())
    payload = push_payload(url, "main", sha)
    payload["repository"]["html_url"] = "https://example.com/not/this"
    status, body, took = github_push(client, payload, delivery)
    assert status == 202 and body == {"status": "queued", "repos": ["shop"], "delivery": delivery}
    assert took < 1.0, f"the webhook took {took:.3f}s"

    repo = wait_ready(client, "shop")
    assert repo["status"] == "ready" and repo["commit"] == sha
    assert generation("shop") == before + per_chain
    r = client.post("/search", json={"query": "refund payment", "repo": "shop"})
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["symbol"] == "refund_payment"

    status, body, _ = github_push(client, payload, delivery)
    assert (status, body) == (202, {"status": "duplicate", "delivery": delivery})
    queue.drain()
    assert generation("shop") == before + per_chain  # the redelivery queued nothing

    status, body, _ = github_push(client, push_payload(url, "feature", sha))
    assert body["status"] == "ignored" and "'feature'" in body["reason"]
    status, body, _ = github_push(client, push_payload("https://example.com/nobody/nothing"))
    assert body["status"] == "ignored" and "no registered repository" in body["reason"]
    queue.drain()
    assert generation("shop") == before + per_chain


def test_gitlab_retry_keeps_idempotency_key(
    parser_client: TestClient, secret: str, tmp_path: Path
) -> None:
    root = tmp_path / "work"
    repo = git.Repo.init(root)
    (root / "a.py").write_text("def a():\n    return 1\n")
    commit_all(repo, "one")
    repo.create_remote("origin", "ssh://git@gitlab.example.com:2222/g/p.git")
    get_catalog().create_repo("p", str(root), None, None)
    payload = {
        "ref": f"refs/heads/{repo.active_branch.name}",
        "project": {"git_http_url": "https://gitlab.example.com/g/p.git"},
    }
    headers = {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook", "Idempotency-Key": "k1"}
    first = {**headers, "X-Gitlab-Event-UUID": "u1"}
    r = parser_client.post("/webhooks/gitlab", json=payload, headers=first)
    assert r.status_code == 202 and r.json()["repos"] == ["p"], r.text
    retry = {**headers, "X-Gitlab-Event-UUID": "u2"}
    r = parser_client.post("/webhooks/gitlab", json=payload, headers=retry)
    assert r.json() == {"status": "duplicate", "delivery": "k1"}
    queue.drain()
