"""One way to run a job: ``enqueue(IndexRepo(repo="svc"))``.

A job is a typed payload (``coderag.jobs``) naming its owning service's queue; the service
registered the function that runs it. With ``REDIS_URL`` set a job goes to that service's rq queue
as ``perform(job name, payload)``, and the service's worker (which imported its own tasks) looks
the handler up. Without it jobs run in this process on one background thread, in order; a job
enqueued by a running job runs inline at once, so a whole parse → embed → refresh chain finishes
inside the job that started it.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from typing import Any

from coderag.errors import Unavailable
from coderag.jobs import Job, handler, job_type
from coderag.settings import Settings, get_settings

log = logging.getLogger(__name__)

JOB_TIMEOUT_S = 6 * 3600
"""rq job timeout: indexing a million-line repository on CPU takes hours."""

JOB_KEY = "coderag:job:{}"
"""Redis key holding the id of a repository's latest queued job."""
OUTCOMES = {"done": 0, "failed": 0}
"""In-process jobs finished so far, by outcome (for /metrics)."""

_local = threading.local()


PERFORM = "coderag.queue.perform"
"""The function every rq job calls; it finds the job's handler in the worker's registry."""


def perform(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Run a job by name (what an rq worker calls): check the payload against its model, then
    call the handler this process registered."""
    job = job_type(name).model_validate(payload)
    return handler(name)(job.model_dump(mode="json"))


def run_now(job: Job) -> dict[str, Any]:
    """Run a job on this thread; jobs it enqueues run inline too."""
    previous = getattr(_local, "inline", False)
    _local.inline = True
    try:
        return handler(job.job)(job.model_dump(mode="json"))
    finally:
        _local.inline = previous


class _InProcess:
    """A single background thread that runs queued jobs in order."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.repos: dict[str, int] = {}  # repository -> its jobs queued or running here
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="coderag-jobs", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                run_now(job)
                OUTCOMES["done"] += 1
            except Exception:
                OUTCOMES["failed"] += 1
                log.exception("job %s failed", job.job)
            finally:
                with self.lock:
                    self.repos[job.repo] -= 1
                self.jobs.task_done()

    def put(self, job: Job) -> None:
        """Queue a job behind the others."""
        with self.lock:
            self.repos[job.repo] = self.repos.get(job.repo, 0) + 1
        self.jobs.put(job)

    def holds(self, repo: str) -> bool:
        """Whether a job of the repository waits or runs on this thread."""
        with self.lock:
            return self.repos.get(repo, 0) > 0


_worker: _InProcess | None = None
_worker_lock = threading.Lock()


def _in_process() -> _InProcess:
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = _InProcess()
        return _worker


def enqueue(job: Job, settings: Settings | None = None) -> str:
    """Queue a job on its service's queue; returns its id."""
    settings = settings or get_settings()
    if not settings.redis_url:
        handler(job.job)  # a job nobody here can run fails now, not later on the thread
        if getattr(_local, "inline", False):
            run_now(job)
            return "inline-" + uuid.uuid4().hex
        _in_process().put(job)
        return "local-" + uuid.uuid4().hex
    from redis import Redis
    from redis.exceptions import ConnectionError, TimeoutError
    from rq import Queue, Retry

    conn = Redis.from_url(settings.redis_url)
    try:
        rq_job = Queue(job.queue, connection=conn).enqueue(
            PERFORM,
            job.job,
            job.model_dump(mode="json"),
            retry=Retry(max=2, interval=[5, 30]),
            job_timeout=JOB_TIMEOUT_S,
            description=f"{job.job}({job.repo})",
        )
        # the chain's latest job, for recovery.heal to look at
        conn.set(JOB_KEY.format(job.repo), rq_job.id, ex=JOB_TIMEOUT_S)
    except (ConnectionError, TimeoutError) as exc:
        raise Unavailable(
            f"the job queue (Redis) is not reachable: {exc}; nothing was queued, try again "
            "when it is back"
        ) from exc
    return rq_job.id


def held_here(repo: str) -> bool:
    """Whether this process's in-process queue has a job of the repository waiting or running."""
    return _worker is not None and _worker.holds(repo)


def pending() -> int:
    """Jobs waiting in the in-process queue."""
    return _worker.jobs.qsize() if _worker is not None else 0


def drain() -> None:
    """Block until the in-process queue is empty (tests and the CLI use it)."""
    if _worker is not None:
        _worker.jobs.join()
