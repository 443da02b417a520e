"""Answers through the real app: a real git repository with dated commits (GIT_AUTHOR_DATE,
GIT_COMMITTER_DATE), indexed by the parser, retrieved with the packaged encoders, answered by the
extractive backend; who/when questions answered from the repository's history."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag_app.server import create_app
from tests.conftest import wait_ready

ORDERS = '''"""Orders: creation, timeouts and expiry."""

import time

ORDER_TIMEOUT_MINUTES = 30


def order_timeout_seconds(merchant=None):
    """Seconds an unpaid order stays open before it expires."""
    return ORDER_TIMEOUT_MINUTES * 60


def create_order(customer, items):
    """Create an order for a customer with the given items."""
    total = sum(item["price"] for item in items)
    stamp = time.time()
    if not items:
        raise ValueError("an order needs at least one item")
    return {"customer": customer, "items": list(items), "total": total, "created": stamp}


def cancel_expired_orders(orders, now):
    """Cancel every unpaid order older than the order timeout."""
    cancelled = 0
    for order in orders:
        age = now - order["created"]
        if order.get("paid"):
            continue
        limit = order_timeout_seconds()
        if age > limit:
            order["status"] = "cancelled"
            cancelled += 1
    return cancelled
'''

README = "# shop\n\nThe shop ships parcels to the moon every Tuesday from the lunar depot.\n"


def _git(root: Path, *args: str, when: datetime | None = None, who: str = "Ada Lovelace") -> str:
    env = dict(os.environ)
    if when is not None:
        stamp = when.strftime("%Y-%m-%dT%H:%M:%S+00:00")
        email = who.split()[0].lower() + "@shop.example"
        env |= {"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp, "GIT_AUTHOR_NAME": who,
                "GIT_COMMITTER_NAME": who, "GIT_AUTHOR_EMAIL": email,
                "GIT_COMMITTER_EMAIL": email}  # fmt: skip
    out = subprocess.run(["git", "-C", str(root), *args], env=env, check=True,
                         capture_output=True, text=True)  # fmt: skip
    return out.stdout.strip()


def _commit(root: Path, message: str, when: datetime, who: str) -> str:
    _git(root, "add", "-A")
    _git(root, "-c", "commit.gpgsign=false", "commit", "-qm", message, when=when, who=who)
    return _git(root, "rev-parse", "--short=7", "HEAD")


@pytest.fixture
def shop(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The shop repository and its commits' short hashes."""
    return build_shop(tmp_path / "shop")


def build_shop(root: Path) -> tuple[Path, dict[str, str]]:
    """The shop repository: an initial commit 100 days ago, a timeout change last month (Dana)
    and a change to cancel_expired_orders this month (Chen)."""
    (root / "shop").mkdir(parents=True)
    (root / "shop" / "orders.py").write_text(ORDERS)
    (root / "README.md").write_text(README)
    _git(root, "init", "-q", "-b", "main")
    now = datetime.now(UTC)
    first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    last_month = (first - timedelta(days=1)).replace(day=10, hour=12)
    shas = {"initial": _commit(root, "Initial shop", now - timedelta(days=100), "Ada Lovelace")}
    text = ORDERS.replace(
        "    return ORDER_TIMEOUT_MINUTES * 60\n",
        '    minutes = (merchant or {}).get("timeout_minutes", ORDER_TIMEOUT_MINUTES)\n'
        "    return minutes * 60\n",
    )
    (root / "shop" / "orders.py").write_text(text)
    shas["timeout"] = _commit(root, "Order timeout honours an override", last_month, "Dana Scully")
    (root / "shop" / "orders.py").write_text(text.replace("in orders:", "in orders[:500]:"))
    shas["batches"] = _commit(root, "Cancel in batches", now - timedelta(minutes=5), "Chen Wei")
    return root, shas


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        yield c


def index(client: TestClient, name: str, path: Path) -> None:
    assert client.post("/repos", json={"name": name, "path": str(path)}).status_code == 202
    assert wait_ready(client, name, timeout=600)["status"] == "ready"


def ask(client: TestClient, repo: str, query: str) -> dict[str, Any]:
    r = client.post("/ask", json={"query": query, "repo": repo})
    assert r.status_code == 200, r.text
    return r.json()


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


@pytest.mark.slow
def test_answers_explain_with_tight_citations_and_git_facts(
    client: TestClient, shop: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, shas = shop
    index(client, "shop", root)
    current = (root / "shop" / "orders.py").read_text()
    raise_line = line_of(current, "raise ValueError")

    body = ask(client, "shop", "What error does create_order raise when there are no items?")
    assert body["refused"] is False, body
    assert "`create_order`" in body["answer"] and "`ValueError`" in body["answer"]
    cites = body["citations"]
    assert cites and all(c["file"] == "shop/orders.py" for c in cites)
    spans = [(c["start_line"], c["end_line"]) for c in cites]
    assert any(s <= raise_line <= e and e - s <= 2 for s, e in spans), spans  # the raise itself
    assert all(e - s < 6 for s, e in spans), "evidence lines, not the whole function"
    assert all(c["last_commit"] == shas["initial"] for c in cites), cites
    assert all(c["last_author"] == "Ada Lovelace" and c["last_date"] for c in cites)

    body = ask(client, "shop", "create_order 在什么情况下会抛出异常？")
    assert body["refused"] is False and "会抛出 `ValueError`" in body["answer"], body
    assert any(c["start_line"] <= raise_line <= c["end_line"] for c in body["citations"])

    body = ask(client, "shop", "How does cancel_expired_orders reach the order timeout?")
    answer = body["answer"]
    assert "`cancel_expired_orders` (function, shop/orders.py:" in answer, answer
    assert "calls `order_timeout_seconds` (shop/orders.py:" in answer, answer
    call_line = line_of(current, "limit = order_timeout_seconds()")
    timeout_def = line_of(current, "def order_timeout_seconds")
    starts = [c["start_line"] for c in body["citations"]]
    calling = next(
        i for i, c in enumerate(body["citations"]) if c["start_line"] <= call_line <= c["end_line"]
    )
    assert timeout_def in starts and calling < starts.index(timeout_def), starts  # call order
    changed = line_of(current, "in orders[:500]:")
    batch = next(c for c in body["citations"] if c["start_line"] <= call_line <= c["end_line"])
    # the call's lines were last touched by the initial commit, the loop header by Chen's
    assert batch["last_commit"] in (shas["initial"], shas["batches"])
    assert not (batch["start_line"] <= changed <= batch["end_line"]) or (
        batch["last_commit"] == shas["batches"]
    )

    # This checks how documentation is explained and cited, with the score-based refusal off:
    # the learned rule refitted for e5-small refuses this one-README question (a false refusal
    # that bench/answers.py measures on real code bases, docs/BENCHMARKS.md issue 20).
    monkeypatch.setenv("CODERAG_SCORE_GATE", "0")
    get_settings.cache_clear()
    body = ask(client, "shop", "When does the shop ship parcels to the moon?")
    monkeypatch.delenv("CODERAG_SCORE_GATE")
    get_settings.cache_clear()
    assert body["refused"] is False, body
    assert body["answer"].startswith("The documentation README.md:"), body["answer"]
    assert "function" not in body["answer"].split("Evidence:")[0]
    assert [c["file"] for c in body["citations"]] == ["README.md"]

    body = ask(client, "shop", "Where is the GraphQL schema stitched together?")
    assert body["refused"] is True and body["citations"] == [] and "GraphQL" in body["answer"]

    # who/when, from the history of the units found
    body = ask(client, "shop", "Who changed the order timeout logic last month?")
    assert body["refused"] is False, body
    assert f"`{shas['timeout']}` by Dana Scully" in body["answer"], body["answer"]
    assert shas["initial"] not in body["answer"] and shas["batches"] not in body["answer"]
    assert body["citations"][0]["start_line"] == timeout_def

    body = ask(client, "shop", "上个月谁改过订单超时逻辑？")
    assert f"`{shas['timeout']}`，Dana Scully" in body["answer"], body["answer"]
    assert "期间修改过" in body["answer"]

    body = ask(client, "shop", "Who changed create_order last month?")
    assert body["answer"].startswith("No commit between"), body["answer"]
    # a quiet window lists the latest changes before it (issue 43's third trial)
    assert "The latest changes before it:" in body["answer"], body["answer"]
    assert f"`{shas['initial']}` by Ada Lovelace" in body["answer"], body["answer"]

    body = ask(client, "shop", "When was cancel_expired_orders last modified?")
    lines = body["answer"].splitlines()
    assert lines[0].startswith("Commits that changed `cancel_expired_orders`"), body["answer"]
    assert lines[1].startswith(f"- `{shas['batches']}` by Chen Wei on "), body["answer"]
    assert f"shop/orders.py line {changed}" in lines[1]  # one line: not "lines"

    bad = client.post("/repos/shop/history", json={"ranges": [{"file": "a.py", "start_line": 5,
                                                               "end_line": 2}]})  # fmt: skip
    assert bad.status_code in (400, 422) and "end_line" in bad.text
    bad = client.post(
        "/repos/shop/history",
        json={"ranges": [{"file": "shop/orders.py", "start_line": 1, "end_line": 2}],
              "log": True, "since": "last tuesday"},
    )  # fmt: skip
    assert bad.status_code == 400 and "ISO 8601" in bad.json()["detail"]


@pytest.mark.slow
def test_a_repository_without_history_says_so(
    client: TestClient, shop: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(shop[0], plain, ignore=shutil.ignore_patterns(".git"))
    index(client, "plain", plain)
    body = ask(client, "plain", "Who changed the order timeout logic last month?")
    assert body["refused"] is True and body["reason"] == "no_history", body
    assert "no git history" in body["answer"] and "`order_timeout_seconds`" in body["answer"]
    body = ask(client, "plain", "上个月谁改过订单超时逻辑？")
    assert "没有 git 历史" in body["answer"]
    body = ask(client, "plain", "What error does create_order raise when there are no items?")
    assert body["citations"] and all(c["last_commit"] is None for c in body["citations"])


PIPELINE = '''"""Request handling."""


def handle_request(raw):
    """Entry point for one request."""
    return parse_payload(raw)


def parse_payload(raw):
    """Decode the payload and check its signature."""
    data = decode_body(raw)
    return verify_signature(data)


def decode_body(raw):
    """Strip the transport framing from the body."""
    return raw.strip()


def verify_signature(data):
    """Whether the data ends with its signature."""
    return data.endswith("sig")
'''


@pytest.mark.slow
def test_a_trace_from_a_named_function_starts_at_it(
    client: TestClient, tmp_path: Path, data_dir: Path
) -> None:
    # the fifth trial's "Trace what happens when Serializer.loads is called" led with its
    # caller: a question naming where to start asks what that function calls
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "pipeline.py").write_text(PIPELINE)
    index(client, "svc", tmp_path / "svc")
    body = ask(client, "svc", "What happens when parse_payload is called?")
    said = body["answer"].split(". ")[0]  # the chain's own sentence
    assert body["refused"] is False and said.startswith("`parse_payload` ("), body["answer"]
    assert "calls `decode_body` (pipeline.py:" in said and "handle_request" not in said, said
    # a flow question naming no function still shows who calls into it first
    body = ask(client, "svc", "How does a request reach the signature check?")
    assert body["refused"] is False, body
