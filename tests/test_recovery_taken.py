"""A worker killed between taking a job off its queue and starting it leaves the job ``queued``
in no queue (the fault bench found it): the repository is started again, not left queued."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus

from coderag import queue
from coderag.queue import JOB_KEY
from coderag.settings import get_settings
from coderag.store import get_catalog
from harness.procs import RedisServer
from harness.snapshot import snapshot
from tests.test_recovery import (  # noqa: F401
    api,
    finished_chain,
    make_repo,
    redis,
    wait_for,
    workers,
)

pytestmark = pytest.mark.slow


def test_a_job_whose_worker_died_as_it_took_it_is_started_again(
    redis: RedisServer,  # noqa: F811
    workers,  # noqa: F811
    tmp_path: Path,
) -> None:
    root = make_repo(tmp_path / "shop", modules=2)
    with api() as client:  # jobs go to Redis; no worker runs yet
        assert client.post("/repos", json={"name": "taken", "path": str(root)}).status_code == 202
        conn = Redis.from_url(redis.url)
        parser = Queue("parser", connection=conn)
        job_id = conn.get(JOB_KEY.format("taken")).decode()
        # what rq's dequeue does (the job moves to the intermediate list), then the kill: the job
        # is still 'queued', and no queue a worker reads holds it
        assert conn.lmove(parser.key, parser.intermediate_queue_key).decode() == job_id
        assert Job.fetch(job_id, connection=conn).get_status() == JobStatus.QUEUED
        assert parser.count == 0
        assert not queue.job_alive("taken", get_settings())
        workers()  # a new worker's healing starts the chain again
        repo = wait_for("taken", finished_chain)
        assert repo.status == "ready", repo
        assert client.post("/repos", json={"name": "full", "path": str(root)}).status_code == 202
        assert wait_for("full", finished_chain).status == "ready"
    assert snapshot("taken") == snapshot("full")
    assert get_catalog().get_repo("taken").units == 8


def test_a_job_waiting_in_its_queue_is_alive(redis: RedisServer, tmp_path: Path) -> None:  # noqa: F811
    root = make_repo(tmp_path / "shop", modules=1)
    with api() as client:
        assert client.post("/repos", json={"name": "waiting", "path": str(root)}).status_code == 202
    assert Queue("parser", connection=Redis.from_url(redis.url)).count == 1
    assert queue.job_alive("waiting", get_settings())
    assert queue.heal(get_catalog(), get_settings()) == []
