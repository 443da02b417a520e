"""Redis with a password, as compose runs it (``--requirepass`` from CODERAG_REDIS_PASSWORD): a
real ``coderag worker`` with the password in REDIS_URL runs jobs; one without it is refused with
one line saying what to fix, and so is a Redis on another host named without a password. Whoever
can write to Redis runs code on every worker, as the job below shows."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from redis import Redis
from redis.exceptions import AuthenticationError
from rq import Queue, Worker

from harness.procs import RedisServer, start_worker, stop, worker_env

PASSWORD = "c0deragRedisPassw0rd"


def run_worker(redis_url: str) -> tuple[int, str]:
    """``coderag worker parser --burst`` on ``redis_url``; its exit code and stderr."""
    code = "import sys; from coderag_app.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, "worker", "parser", "--burst"],
        env=worker_env(REDIS_URL=redis_url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stderr


@pytest.fixture
def redis_with_password(tmp_path: Path):
    """A real redis-server started with --requirepass."""
    server = RedisServer(tmp_path / "redis", appendonly=False, password=PASSWORD).start()
    yield server
    server.stop()


@pytest.mark.slow
def test_a_worker_with_the_password_runs_jobs_and_one_without_is_refused(
    redis_with_password: RedisServer, tmp_path: Path, data_dir: Path
) -> None:
    server = redis_with_password
    anonymous = server.url.replace(f":{PASSWORD}@", "")
    assert "@" not in anonymous
    with pytest.raises(AuthenticationError):
        Redis.from_url(anonymous).set("x", "1")  # protected: nothing is written without it

    code, err = run_worker(anonymous)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "Redis refused this worker" in err and "redis://:PASSWORD@" in err, err
    assert "Traceback" not in err

    code, err = run_worker(server.url.replace(PASSWORD, "wrong"))
    assert code == 2 and "Redis refused this worker" in err, err

    conn = Redis.from_url(server.url)
    assert Worker.all(connection=conn) == []
    worker = start_worker(worker_env(REDIS_URL=server.url), tmp_path / "worker.log", ("parser",))
    try:
        # any importable function: this is why Redis needs a password
        job = Queue("parser", connection=conn).enqueue("os.getcwd")
        deadline = time.monotonic() + 120
        while job.get_status(refresh=True) != "finished":
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
            time.sleep(0.2)
        assert job.return_value()
    finally:
        stop(worker)


def test_a_redis_on_another_host_needs_a_password(data_dir: Path) -> None:
    code, err = run_worker("redis://redis.internal.example:6379/0")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "without a password" in err and "--requirepass" in err, err
