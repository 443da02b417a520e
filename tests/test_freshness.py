"""Freshness in every answer (issue 43), on a real git repository in a temp folder: indexed, then
two commits made without reindexing, every way of asking says the index is "2 commits behind
HEAD" — /ask (JSON and streamed), the OpenAI-compatible chat (a line in the text and a field),
MCP's ask tool — and the count follows HEAD (cached by HEAD's commit, recounted when it moves),
back to "(HEAD)" after a reindex."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import git
import httpx
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from coderag_app.mcp_server import build_server
from coderag_parser import freshness
from tests.conftest import commit_all, indexed, wait_ready

pytestmark = pytest.mark.slow

SOURCES = {
    "shop/orders.py": (
        "def create_order(items: list[str]) -> dict:\n"
        '    """Create an order from its items; an empty order is refused."""\n'
        "    if not items:\n"
        '        raise ValueError("an order needs items")\n'
        '    return {"items": items, "status": "new"}\n'
    ),
}
QUESTION = "How is an order created?"


def _ask(client: TestClient, **extra: str) -> dict[str, Any]:
    r = client.post("/ask", json={"query": QUESTION, "repo": "shop"}, headers=extra)
    assert r.status_code == 200, r.text
    if r.headers["content-type"].startswith("text/event-stream"):
        return json.loads(r.text.strip().split("\n\n")[-1].split("data: ", 1)[1])
    return r.json()


def _chat(client: TestClient, question: str = QUESTION) -> dict[str, Any]:
    body = {"model": "coderag/shop", "messages": [{"role": "user", "content": question}]}
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def _mcp(client: TestClient) -> dict[str, Any]:
    def http() -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=client.app), base_url="http://localhost"
        )

    async def call() -> dict[str, Any]:
        async with Client(build_server(http)) as mcp:
            result = await mcp.call_tool("ask", {"query": QUESTION, "repo": "shop"})
        assert not result.is_error, result.content
        return result.structured_content or json.loads(result.content[0].text)

    return anyio.run(call)


def _commit(root: Path, n: int) -> str:
    """Add a function and commit it; the new HEAD."""
    (root / "shop" / f"extra_{n}.py").write_text(f"def extra_{n}() -> int:\n    return {n}\n")
    return commit_all(git.Repo(root), f"extra {n}")


def test_every_answer_says_how_far_head_has_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "shop"
    counts: list[list[str]] = []
    real_git = freshness._git

    def counting(where: Path, args: list[str]) -> str | None:
        if args[0] == "rev-list":
            counts.append(args)
        return real_git(where, args)

    monkeypatch.setattr(freshness, "_git", counting)
    with indexed(root, "shop", SOURCES) as client:
        built = git.Repo(root).head.commit.hexsha
        fresh = _ask(client)["freshness"]
        assert fresh == {
            "indexed_commit": built,
            "head_commit": built,
            "commits_behind": 0,
            "note": f"indexed at commit {built[:12]} (HEAD)",
        }

        _commit(root, 1)
        head = _commit(root, 2)  # two commits the index has not seen
        behind = "2 commits behind HEAD"
        for body in (_ask(client), _ask(client, accept="text/event-stream"), _mcp(client)):
            fresh = body["freshness"]
            assert (fresh["indexed_commit"], fresh["head_commit"]) == (built, head), fresh
            assert fresh["commits_behind"] == 2 and behind in fresh["note"], fresh
            assert not body["refused"] and body["citations"], body
        assert len(counts) == 1, counts  # counted once for this HEAD, then cached

        chat = _chat(client)
        text = chat["choices"][0]["message"]["content"]
        assert behind in text and built[:12] in text and head[:12] in text, text
        assert text.rstrip().endswith("reindex for the newest code._"), text
        assert chat["coderag"]["freshness"]["commits_behind"] == 2
        zh = _chat(client, "订单是怎么创建的？")["choices"][0]["message"]["content"]
        assert "落后 HEAD 2 个提交" in zh, zh

        _commit(root, 3)  # HEAD moves: counted again
        assert _ask(client)["freshness"]["commits_behind"] == 3 and len(counts) == 2
        r = client.get("/repos/shop/freshness")
        assert r.status_code == 200 and r.json()["commits_behind"] == 3
        assert client.get("/repos/shop/health").json()["commits_behind"] == 3

        assert client.post("/repos/shop/reindex").status_code == 202
        assert wait_ready(client, "shop")["status"] == "ready"
        now = git.Repo(root).head.commit.hexsha
        fresh = _ask(client)["freshness"]
        assert (fresh["indexed_commit"], fresh["commits_behind"]) == (now, 0), fresh
        text = _chat(client)["choices"][0]["message"]["content"]
        assert text.rstrip().endswith(f"Indexed at commit {now[:12]} (HEAD)._"), text

        assert client.get("/repos/nope/freshness").status_code == 404


def test_a_folder_without_git_answers_without_freshness(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "orders.py").write_text(SOURCES["shop/orders.py"])
    from coderag_app.server import create_app

    with TestClient(create_app()) as client:
        assert client.post("/repos", json={"name": "plain", "path": str(root)}).status_code == 202
        assert wait_ready(client, "plain")["status"] == "ready"
        r = client.post("/ask", json={"query": QUESTION, "repo": "plain"})
        assert r.status_code == 200 and r.json()["freshness"]["indexed_commit"] is None, r.text
        assert r.json()["freshness"]["note"] == ""
        chat = {"model": "coderag/plain", "messages": [{"role": "user", "content": QUESTION}]}
        text = client.post("/v1/chat/completions", json=chat).json()["choices"][0]["message"]
        assert "HEAD" not in text["content"] and "commit" not in text["content"].lower()
