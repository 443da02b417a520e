"""A real ``coderag serve`` in a subprocess: started on a loopback port, waited on until
``/health`` answers 200, stopped gently then for sure. The tests' live server and the benchmarks
that ask a real server share it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness.procs import free_port

ROOT = Path(__file__).resolve().parent.parent
"""The repository root (the server runs from it unless told otherwise)."""

TAIL = 3000
"""Characters of the server's output quoted when it exits before it is healthy."""


@dataclass
class Server:
    """A started ``coderag serve``: its process, base URL and where its output goes (a log file,
    or ``None`` for a text pipe at ``proc.stdout``)."""

    proc: subprocess.Popen[str]
    base: str
    log: Path | None

    def output_tail(self) -> str:
        """The end of what the server printed (from a pipe: everything left unread, waiting
        for the process to close it)."""
        if self.log is not None:
            return self.log.read_text(errors="replace")[-TAIL:]
        return (self.proc.stdout.read() if self.proc.stdout else "")[-TAIL:]


def start_server(
    env: Mapping[str, str],
    *,
    args: Sequence[str] = (),
    log: Path | None = None,
    port: int | None = None,
    host: str | None = "127.0.0.1",
    cwd: Path | None = ROOT,
    unbuffered: bool = False,
) -> Server:
    """Start ``python -m coderag_app.cli serve`` (``args``: more of its arguments; ``host``
    ``None`` leaves ``--host`` to them or the default) with exactly ``env``, its output to
    ``log`` (overwritten) or, without one, a text pipe; returns at once, before it is healthy."""
    port = free_port() if port is None else port
    cmd = [sys.executable, *(["-u"] if unbuffered else []), "-m", "coderag_app.cli", "serve"]
    cmd += [*(["--host", host] if host else []), "--port", str(port), *args]
    base = f"http://127.0.0.1:{port}"
    if log is None:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        return Server(proc, base, None)
    # the child holds its own copy of the descriptor, so ours can close at once; text mode only
    # types the (absent) pipes, so every server's process is a Popen[str]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT, text=True
        )
    return Server(proc, base, log)


def wait_healthy(server: Server, timeout: float = 900) -> None:
    """Return once ``/health`` answers 200; raise ``RuntimeError`` with the end of its output if
    the server exits first, or after ``timeout`` seconds."""
    wait_http_ok(server.proc, server.base + "/health", server.output_tail, timeout, "the server")


def wait_http_ok(
    proc: subprocess.Popen[Any],
    url: str,
    output_tail: Callable[[], str],
    timeout: float,
    name: str,
    interval: float = 0.2,
) -> None:
    """Return once ``url`` answers 200; raise ``RuntimeError`` naming ``name`` with
    ``output_tail()`` if ``proc`` exits first, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited: {output_tail()}")
        try:
            # a server busy indexing may be slow to answer; a timeout here is just another try
            if httpx.get(url, timeout=10).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not answer {url} within {timeout:.0f} s")
        time.sleep(interval)


def stop_server(server: Server, timeout: float = 30) -> str:
    """Terminate the server, wait ``timeout`` seconds, then kill it; what it printed to its pipe
    and nobody read (empty with a log file)."""
    proc = server.proc
    proc.terminate()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


@contextmanager
def serving(
    env: Mapping[str, str],
    *,
    args: Sequence[str] = (),
    log: Path | None = None,
    port: int | None = None,
    cwd: Path | None = ROOT,
    timeout: float = 900,
) -> Iterator[Server]:
    """A healthy server on loopback (``start_server``'s arguments) for the ``with`` block;
    stopped on exit, whether or not it came up."""
    server = start_server(env, args=args, log=log, port=port, cwd=cwd)
    try:
        wait_healthy(server, timeout)
        yield server
    finally:
        stop_server(server)
