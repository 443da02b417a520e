"""A real ``coderag serve`` (uvicorn) in a subprocess on a free loopback port, for the browser and
MCP tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
"""The repository root (the subprocess runs from it)."""


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """This process's environment for a child coderag, with its own data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODERAG_", "REDIS_URL"))}
    env["CODERAG_DATA_DIR"] = str(data_dir)
    # the test's temporary folders, where its repositories live, may be registered by path
    env["CODERAG_REPO_ROOTS"] = str(data_dir.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.update(extra)
    return env


@contextmanager
def live_server(
    data_dir: Path, timeout: float = 900, cli: tuple[str, ...] = (), **extra: str
) -> Iterator[str]:
    """Start the all-in-one server (``cli``: more arguments of ``coderag serve``); yields its
    base URL; stops it on exit."""
    port = free_port()
    log = open(data_dir.parent / f"server-{port}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coderag_app.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *cli,
        ],
        cwd=ROOT,
        env=child_env(data_dir, **extra),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {Path(log.name).read_text()[-3000:]}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server did not answer /health in time")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


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
