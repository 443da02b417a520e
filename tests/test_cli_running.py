"""``coderag ask`` and ``coderag mcp`` as a new user runs them (issue 43): from another folder,
beside a running server, they use it (the answer printed once); with no server and no index
they say exactly what to do and leave no empty ``data/`` behind."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.liveserver import child_env, free_port, live_server

pytestmark = pytest.mark.slow


def _cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    """An environment with no data directory set (the default ``data`` of the folder it runs
    in) and the serve default on a port nobody listens on."""
    env = child_env(tmp / "unused")
    env.pop("CODERAG_DATA_DIR")
    env.pop("CODERAG_REPO_ROOTS")
    env["PORT"] = str(free_port())
    env.update(extra)
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coderag_app.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_without_a_server_or_index_they_say_what_to_do(tmp_path: Path) -> None:
    """No server answers and the folder holds no index: exit 2 with the command that starts
    one, and no empty data directory is made where the agent happened to start it."""
    folder = tmp_path / "agent-folder"
    folder.mkdir()
    env = _cli_env(tmp_path)
    for args in (["ask", "where are orders created?", "--repo", "repo"], ["mcp"]):
        done = _run(args, folder, env)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "no coderag server answers at" in done.stderr, done.stderr
        assert "coderag serve --index" in done.stderr and "--url" in done.stderr, done.stderr
        assert "no repository named" not in done.stderr
    assert not (folder / "data").exists()


def test_ask_and_mcp_use_the_running_server(sample_repo: Path, data_dir: Path) -> None:
    """With a server up, ``coderag ask`` from another folder answers through it (the answer
    once, with its citations) and ``coderag mcp`` finds it by ``CODERAG_URL``."""
    with live_server(data_dir) as base:
        r = httpx.post(f"{base}/repos", json={"name": "sample", "path": str(sample_repo)})
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 600
        while httpx.get(f"{base}/repos/sample").json()["status"] != "ready":
            assert time.monotonic() < deadline
            time.sleep(0.5)
        folder = data_dir.parent / "elsewhere"
        folder.mkdir()
        env = _cli_env(data_dir.parent, CODERAG_URL=base)
        done = _run(["ask", "How is an order created?", "--repo", "sample"], folder, env)
        assert done.returncode == 0, done.stderr
        answer = httpx.post(
            f"{base}/ask", json={"query": "How is an order created?", "repo": "sample"}
        ).json()
        first_sentence = answer["answer"].split("\n")[0][:60]
        assert first_sentence and done.stdout.count(first_sentence) == 1, done.stdout
        assert "cites src/" in done.stdout, done.stdout
        assert not (folder / "data").exists()

        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "coderag_app.cli", "mcp"],
            env=env,
            cwd=str(folder),
        )

        async def listed() -> list[str]:
            async with Client(params) as c:
                result = await c.call_tool("list_repos", {})
                assert not result.is_error, result.content
                return [str(block.text) for block in result.content if hasattr(block, "text")]

        assert any("sample" in text for text in anyio.run(listed))
        assert not (folder / "data").exists()


def test_they_find_a_server_on_any_port_and_its_rows_are_the_tools(
    sample_repo: Path, data_dir: Path
) -> None:
    """A server on a port of its own (``make run PORT=...``) announces itself: ``coderag ask``,
    ``coderag mcp`` and ``coderag eval`` started from another folder find it with nothing set
    (issue 43's second trial: they looked on the default port only), and each MCP tool call,
    a read included, is one ``mcp/<tool>`` row written by the server."""
    state = str(data_dir.parent / "state")
    with live_server(data_dir, XDG_STATE_HOME=state) as base:
        r = httpx.post(f"{base}/repos", json={"name": "sample", "path": str(sample_repo)})
        assert r.status_code == 202, r.text
        deadline = time.monotonic() + 600
        while not httpx.get(f"{base}/repos/sample").json().get("complete"):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        (announced,) = list((data_dir.parent / "state" / "coderag" / "servers").glob("*.json"))
        assert json.loads(announced.read_text())["url"] == base
        folder = data_dir.parent / "agent-folder"
        folder.mkdir()
        env = _cli_env(data_dir.parent, XDG_STATE_HOME=state)
        assert "CODERAG_URL" not in env
        done = _run(["ask", "How is an order created?", "--repo", "sample"], folder, env)
        assert done.returncode == 0 and "cites src/" in done.stdout, done.stderr

        before = _export(base)
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "coderag_app.cli", "mcp"], env=env, cwd=str(folder)
        )
        read = {"repo": "sample", "file": "src/go/sample.go", "start_line": 1, "end_line": 5}

        async def tools() -> None:
            async with Client(params) as c:
                for name, arguments in (
                    ("list_repos", {}),
                    ("search_code", {"query": "process an order", "repo": "sample"}),
                    ("read_range", read),
                    ("ask", {"query": "How is an order created?", "repo": "sample"}),
                ):
                    result = await c.call_tool(name, arguments)
                    assert not result.is_error, (name, result.content)

        anyio.run(tools)
        rows = _export(base)[len(before) :]
        assert [r["endpoint"] for r in rows] == [
            "mcp/list_repos", "mcp/search_code", "mcp/read_range", "mcp/ask"
        ], rows  # fmt: skip
        assert rows[2]["repo"] == "sample" and json.loads(rows[3]["cited"]), rows

        done = _run(["eval", "sample", "--limit", "3", "--json"], folder, env)
        assert done.returncode == 0, done.stderr[-2000:]
        assert f"reading the index of the server at {base}" in done.stderr
        assert not (folder / "data").exists()
    # a server stopped by its signal withdraws its announcement as it stops (uvicorn raises the
    # signal it caught again, past any finally: issue 43's fourth trial found the files left)
    assert not announced.exists()
    from coderag.settings import get_settings
    from coderag_app import running

    assert running.running_servers(get_settings()) == []


def _export(base: str) -> list[dict[str, str]]:
    r = httpx.get(f"{base}/audit/export.csv")
    assert r.status_code == 200, r.text
    return list(csv.DictReader(io.StringIO(r.text)))
