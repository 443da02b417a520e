"""Real processes for fault tests and the fault bench: rq workers started as ``coderag worker``,
killed with SIGKILL as a whole process group (the worker and its work horse), and redis-server."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from redis import Redis

QUEUES = ("parser", "embedder", "retriever")
"""Every queue an indexing chain goes through."""


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(**extra: str) -> dict[str, str]:
    """This process's environment (settings, PYTHONPATH) with the given additions."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(extra)
    return env


def start_worker(
    env: dict[str, str], log: Path, queues: tuple[str, ...] = QUEUES
) -> subprocess.Popen:
    """``coderag worker`` for ``queues`` (every queue of a chain by default) in its own process
    group."""
    code = "import sys; from coderag_app.cli import main; sys.exit(main(sys.argv[1:]))"
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-c", code, "worker", *queues],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (rq puts its work horse in a session of its own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill9(proc: subprocess.Popen) -> None:
    """SIGKILL a worker with its work horse and every other child, as a container kill or the
    OOM killer would."""
    below = descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in below:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(30)


def stop(proc: subprocess.Popen) -> None:
    """Stop a process (group) started here, gently, then for sure."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        kill9(proc)


class RedisServer:
    """A redis-server on a loopback port, restartable on the same data directory."""

    def __init__(self, data: Path, appendonly: bool = True, password: str = "") -> None:
        self.data = data
        self.appendonly = appendonly
        self.password = password
        self.port = free_port()
        self.url = f"redis://{f':{password}@' if password else ''}127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        data.mkdir(parents=True, exist_ok=True)

    def start(self) -> RedisServer:
        """Start (or restart) the server and wait until it answers."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.appendonly else []
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data)]
            + ["--save", ""]
            + (aof or ["--appendonly", "no"])
            + (["--requirepass", self.password] if self.password else []),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            try:
                if Redis.from_url(self.url).ping():
                    return self
            except Exception:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self, kill: bool = False) -> None:
        """Stop the server: SIGKILL (a crash) or SIGTERM (a restart)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            self.proc.wait(30)
        self.proc = None


def start_chroma(path: Path, sweep_every: float | None = None) -> tuple[subprocess.Popen, str]:
    """A Chroma server keeping its data in ``path``, on a free loopback port, once it answers;
    (the process, its URL): plain ``chroma run``, or with ``sweep_every`` the product's
    ``coderag chroma``, which removes deleted collections' folders that often."""
    import httpx

    binary = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    port = free_port()
    where = ["--path", str(path), "--host", "127.0.0.1", "--port", str(port)]
    if sweep_every is None:
        cmd = [binary, "run", *where]
    else:
        code = "import sys; from coderag_app.cli import main; sys.exit(main(sys.argv[1:]))"
        cmd = [sys.executable, "-c", code, "chroma", *where, "--sweep-every", str(sweep_every)]
    proc = subprocess.Popen(
        cmd,
        env=worker_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a process group of its own, which ``stop`` ends
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/api/v2/heartbeat", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    stop(proc)
    raise RuntimeError("chroma run did not start")
