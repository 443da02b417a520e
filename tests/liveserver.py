"""A real ``coderag serve`` (uvicorn) in a subprocess on a free loopback port, for the browser and
MCP tests: a thin layer over ``harness.serve`` with the tests' environment."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from harness.mcp import mcp_tool
from harness.procs import free_port
from harness.serve import ROOT, serving

__all__ = ["ROOT", "child_env", "free_port", "live_server", "mcp_tool", "wait_complete"]


def child_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """This process's environment for a child coderag, with its own data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODERAG_", "REDIS_URL"))}
    env["CODERAG_DATA_DIR"] = str(data_dir)
    # the test's temporary folders, where its repositories live, may be registered by path
    env["CODERAG_REPO_ROOTS"] = str(data_dir.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    # a server announces itself there (coderag_app.running): each test's servers to its own
    env["XDG_STATE_HOME"] = str(data_dir.parent / "state")
    env.update(extra)
    return env


@contextmanager
def live_server(
    data_dir: Path, timeout: float = 900, cli: tuple[str, ...] = (), **extra: str
) -> Iterator[str]:
    """Start the all-in-one server (``cli``: more arguments of ``coderag serve``); yields its
    base URL; stops it on exit."""
    port = free_port()
    log = data_dir.parent / f"server-{port}.log"
    env = child_env(data_dir, **extra)
    with serving(env, args=cli, log=log, port=port, timeout=timeout) as server:
        yield server.base


def wait_complete(client: httpx.Client, name: str, timeout: float = 600) -> dict:
    """Poll /repos/NAME until the repository is complete (or failed); its last state."""
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = client.get(f"/repos/{name}").json()
        if body["status"] == "error" or (body["status"] == "ready" and body["complete"]):
            return body
        time.sleep(0.5)
    raise AssertionError(f"{name} not complete after {timeout:.0f} s: {body}")
