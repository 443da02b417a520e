"""Processes of the fault bench: a corpus as a git repository, ``coderag serve`` and
``coderag worker`` started as real processes (and every one of them stopped at the end), and what
a worker was doing when it was killed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.fetch import corpus_root
from harness.procs import QUEUES, free_port, start_worker, stop, worker_env

GIT_DATES = {
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}
"""Fixed commit dates, so a corpus commits to the same sha (and units' last_commit) every run."""

STARTED: list[subprocess.Popen] = []
"""Every server and worker started here, for ``stop_all``."""


def corpus_repo(name: str, subdir: str, dest: Path) -> Path:
    """A git repository of one commit holding a pinned corpus (or one folder of it), fetched by
    bench/fetch.py."""
    shutil.copytree(corpus_root(name) / subdir, dest, symlinks=True)
    env = {**os.environ, **GIT_DATES, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "b@x.org"}
    env |= {"GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "b@x.org"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", name]):
        subprocess.run(["git", *cmd], cwd=dest, env=env, check=True)
    return dest


class Server:
    """``coderag serve`` on a loopback port, as its own process group."""

    def __init__(self, log: Path, redis: bool) -> None:
        self.log, self.redis = log, redis
        self.base = f"http://127.0.0.1:{free_port()}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Server:
        """Start it and wait until /health answers."""
        env = worker_env()
        if not self.redis:  # jobs run on the server's own thread
            env.pop("REDIS_URL", None)
            env.pop("CODERAG_REDIS_URL", None)
        code = "import sys; from coderag_app.cli import main; sys.exit(main(sys.argv[1:]))"
        port = self.base.rsplit(":", 1)[1]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code, "serve", "--port", port],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        STARTED.append(self.proc)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited; see {self.log}")
            try:
                if httpx.get(self.base + "/health", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise SystemExit("the server did not answer /health in 600 s")

    def register(self, name: str, root: Path) -> None:
        """``POST /repos`` a path; exits on anything but 202."""
        r = httpx.post(self.base + "/repos", json={"name": name, "path": str(root)}, timeout=60)
        if r.status_code != 202:
            raise SystemExit(f"POST /repos {name}: {r.status_code} {r.text}")


def ready_worker(log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A new ``coderag worker`` on every queue (with ``env``, this process's environment by
    default), once it listens."""
    from redis import Redis
    from rq import Worker

    proc = start_worker(env or worker_env(), log)
    STARTED.append(proc)
    conn = Redis.from_url(os.environ["REDIS_URL"])
    while not any(w.pid == proc.pid for w in Worker.all(connection=conn)):
        if proc.poll() is not None:
            raise SystemExit(f"the worker exited; see {log}")
        time.sleep(0.2)
    return proc


def running_jobs(repo: str) -> str:
    """The stages of ``repo`` whose jobs a worker has taken and not finished (``-``: none)."""
    from redis import Redis
    from rq import Queue
    from rq.job import Job
    from rq.registry import StartedJobRegistry

    conn = Redis.from_url(os.environ["REDIS_URL"])
    busy = []
    for q in QUEUES:
        ids = StartedJobRegistry(queue=Queue(q, connection=conn)).get_job_ids()
        jobs = [j for j in Job.fetch_many(ids, connection=conn) if j is not None]
        if any(j.args and j.args[0].get("repo") == repo for j in jobs):
            busy.append(q)
    return "+".join(busy) or "-"


def queue_sizes() -> dict[str, int]:
    """Jobs waiting in each rq queue."""
    from redis import Redis
    from rq import Queue

    conn = Redis.from_url(os.environ["REDIS_URL"])
    return {q: Queue(q, connection=conn).count for q in QUEUES}


def stop_all() -> None:
    """Stop every process started here that still runs."""
    for proc in STARTED:
        stop(proc)
