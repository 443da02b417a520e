"""One way to run a job: ``enqueue("coderag_parser.tasks.index_repo", {...})``.

Jobs are plain functions taking and returning JSON-able dicts. With ``REDIS_URL`` set they go to
the rq queue named after the owning service (parser, embedder, retriever, generator), where that
service's worker picks them up. Without it they run in this process on one background thread, in
order; a job enqueued by a running job runs inline at once, so a whole parse → embed → refresh
chain finishes inside the job that started it.
"""

from __future__ import annotations

import importlib
import logging
import queue
import threading
import uuid
from collections.abc import Callable
from typing import Any

from coderag.errors import Unavailable
from coderag.settings import Settings, get_settings

log = logging.getLogger(__name__)

QUEUE_OF_PACKAGE = {
    "coderag_parser": "parser",
    "coderag_embedder": "embedder",
    "coderag_retriever": "retriever",
    "coderag_generator": "generator",
}
"""rq queue that runs the jobs of each service package."""

JOB_TIMEOUT_S = 6 * 3600
"""rq job timeout: indexing a million-line repository on CPU takes hours."""

JOB_KEY = "coderag:job:{}"
"""Redis key holding the id of a repository's latest queued job."""
OUTCOMES = {"done": 0, "failed": 0}
"""In-process jobs finished so far, by outcome (for /metrics)."""

_local = threading.local()


def resolve(job: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Import a job function from its dotted path."""
    module, _, name = job.rpartition(".")
    if module.split(".")[0] not in QUEUE_OF_PACKAGE:
        raise ValueError(f"{job!r} is not a coderag job")
    return getattr(importlib.import_module(module), name)


def queue_name(job: str) -> str:
    """The rq queue a job goes to."""
    return QUEUE_OF_PACKAGE[job.split(".")[0]]


def run_now(job: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Run a job on this thread; jobs it enqueues run inline too."""
    previous = getattr(_local, "inline", False)
    _local.inline = True
    try:
        return resolve(job)(payload)
    finally:
        _local.inline = previous


class _InProcess:
    """A single background thread that runs queued jobs in order."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="coderag-jobs", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            job, payload = self.jobs.get()
            try:
                run_now(job, payload)
                OUTCOMES["done"] += 1
            except Exception:
                OUTCOMES["failed"] += 1
                log.exception("job %s failed", job)
            finally:
                self.jobs.task_done()


_worker: _InProcess | None = None
_worker_lock = threading.Lock()


def _in_process() -> _InProcess:
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = _InProcess()
        return _worker


def enqueue(job: str, payload: dict[str, Any], settings: Settings | None = None) -> str:
    """Queue a job; returns its id."""
    settings = settings or get_settings()
    resolve(job)
    if getattr(_local, "inline", False) and not settings.redis_url:
        run_now(job, payload)
        return "inline-" + uuid.uuid4().hex
    if settings.redis_url:
        from redis import Redis
        from redis.exceptions import ConnectionError, TimeoutError
        from rq import Queue, Retry

        conn = Redis.from_url(settings.redis_url)
        try:
            rq_job = Queue(queue_name(job), connection=conn).enqueue(
                job, payload, retry=Retry(max=2, interval=[5, 30]), job_timeout=JOB_TIMEOUT_S
            )
            if "repo" in payload:  # the chain's latest job, for recovery.heal to look at
                conn.set(JOB_KEY.format(payload["repo"]), rq_job.id, ex=JOB_TIMEOUT_S)
        except (ConnectionError, TimeoutError) as exc:
            raise Unavailable(
                f"the job queue (Redis) is not reachable: {exc}; nothing was queued, try again "
                "when it is back"
            ) from exc
        return rq_job.id
    _in_process().jobs.put((job, payload))
    return "local-" + uuid.uuid4().hex


def pending() -> int:
    """Jobs waiting in the in-process queue."""
    return _worker.jobs.qsize() if _worker is not None else 0


def drain() -> None:
    """Block until the in-process queue is empty (tests and the CLI use it)."""
    if _worker is not None:
        _worker.jobs.join()
