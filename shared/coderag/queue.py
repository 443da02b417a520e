"""One way to run a job: ``enqueue(IndexRepo(repo="svc"))``.

A job is a typed payload (``coderag.jobs``) naming its owning service's queue; the service
registered the function that runs it. With ``REDIS_URL`` set a job goes to that service's rq queue
as ``perform(job name, payload)``, and the service's worker (which imported its own tasks) looks
the handler up. Without it jobs run in this process on a background thread per service queue
(a lane), each lane in order, so one repository's parse never waits behind another's vectors.
``run_now`` runs a job on the calling thread, and every job it enqueues inline at once, so a
whole parse → embed → refresh chain finishes inside the call (the CLI and the benches).

When indexing breaks (a killed worker, a lost job), ``heal`` starts again the chains of
repositories left ``queued`` or ``indexing`` (or owing vectors), at start-up and periodically
in every worker, up to ``job_retries`` times before ``error``; a stage's own failure is recorded
by ``coderag.chain``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any, cast

from redis.exceptions import RedisError

from coderag.errors import Unavailable
from coderag.jobs import IndexRepo, Job, Result, handler, job_type
from coderag.settings import Settings, get_settings
from coderag.store import Catalog, refs

log = logging.getLogger(__name__)

JOB_TIMEOUT_S = 6 * 3600
"""rq job timeout: indexing a million-line repository on CPU takes hours."""

JOB_KEY = "coderag:job:{}"
"""Redis key holding the id of a repository's latest queued job."""
IN_PROGRESS = ("queued", "indexing")
"""States a repository leaves only when its chain ends."""

OUTCOMES = {"done": 0, "failed": 0}
"""In-process jobs finished so far, by outcome (for /metrics)."""

_local = threading.local()


PERFORM = "coderag.queue.perform"
"""The function every rq job calls; it finds the job's handler in the worker's registry."""


def perform(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Run a job by name (what an rq worker calls): the payload read into its model, the handler
    this process registered run on it, and its result turned back into JSON for rq to keep."""
    return handler(name)(job_type(name).from_queue(payload)).model_dump(mode="json")


def run_now(job: Job) -> Result:
    """Run a job on this thread; jobs it enqueues run inline too."""
    previous = getattr(_local, "inline", False)
    _local.inline = True
    try:
        return handler(job.job)(job)
    finally:
        _local.inline = previous


class _Lane:
    """One background thread that runs one service's queued jobs in order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.jobs: queue.Queue[Job] = queue.Queue()
        self.repos: dict[str, int] = {}  # repository -> its jobs queued or running here
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"coderag-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            try:
                handler(job.job)(job)
                OUTCOMES["done"] += 1
            except Exception:
                OUTCOMES["failed"] += 1
                log.exception("job %s failed", job.job)
            finally:
                with self.lock:
                    self.repos[job.repo] -= 1
                self.jobs.task_done()

    def put(self, job: Job) -> None:
        """Queue a job behind the others of this lane."""
        with self.lock:
            self.repos[job.repo] = self.repos.get(job.repo, 0) + 1
        self.jobs.put(job)

    def holds(self, repo: str) -> bool:
        """Whether a job of the repository waits or runs in this lane."""
        with self.lock:
            return self.repos.get(repo, 0) > 0

    def busy(self) -> bool:
        """Whether a job waits or runs in this lane."""
        with self.lock:
            return any(self.repos.values())


class _InProcess:
    """The in-process queue: a lane per service queue, as the rq workers of compose have, so a
    repository's parse (searchable in seconds) never waits behind another's vectors; a job
    enqueued by a lane's job goes to its own lane."""

    def __init__(self) -> None:
        self.lanes: dict[str, _Lane] = {}
        self.lock = threading.Lock()

    def lane(self, name: str) -> _Lane:
        """The lane of a service queue, started on first use."""
        with self.lock:
            if name not in self.lanes:
                self.lanes[name] = _Lane(name)
            return self.lanes[name]

    def all(self) -> list[_Lane]:
        """Every lane started so far."""
        with self.lock:
            return list(self.lanes.values())

    def put(self, job: Job) -> None:
        """Queue a job on its service's lane."""
        self.lane(job.queue).put(job)

    def holds(self, repo: str) -> bool:
        """Whether a job of the repository waits or runs in any lane."""
        return any(lane.holds(repo) for lane in self.all())


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
        # the chain's latest job, for heal to look at
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
    """Jobs waiting in the in-process queue's lanes."""
    return sum(lane.jobs.qsize() for lane in _worker.all()) if _worker is not None else 0


def drain() -> None:
    """Block until every lane of the in-process queue is idle (tests and the CLI use it); a job
    may queue the next stage on another lane, so the lanes are joined until none is busy."""
    while _worker is not None:
        lanes = _worker.all()
        for lane in lanes:
            lane.jobs.join()
        if not any(lane.busy() for lane in _worker.all()):
            return


# --- healing -------------------------------------------------------------------------------------


def _alive(name: str, lease_until: float | None, settings: Settings, startup: bool) -> bool:
    """Whether a chain is still under way: its lease is live, or its latest job waits in (or has
    just been taken from) a queue."""
    if not settings.redis_url:
        # in-process jobs never outlive their process: at start-up every chain is dead, except
        # one this process queued before it started serving (`coderag serve --index`)
        if held_here(name):
            return True
        return not startup and lease_until is not None and lease_until > time.time()
    if lease_until is not None and lease_until > time.time():
        return True
    return job_alive(name, settings)


def job_alive(name: str, settings: Settings) -> bool:
    """Whether the repository's latest rq job still waits in a queue or has just been taken
    (False without Redis, or when Redis lost it)."""
    if not settings.redis_url:
        return False
    from redis import Redis
    from rq import Queue
    from rq.exceptions import NoSuchJobError
    from rq.job import Job, JobStatus

    conn = Redis.from_url(settings.redis_url)
    # a client made without decode_responses answers bytes
    job_id = cast(bytes | None, conn.get(JOB_KEY.format(name)))
    if job_id is None:
        return False
    try:
        job = Job.fetch(job_id.decode(), connection=conn)
    except NoSuchJobError:
        return False
    status = job.get_status(refresh=True)
    if status == JobStatus.QUEUED:
        # a worker killed just after taking the job leaves it 'queued' in no queue, for ever
        return conn.lpos(Queue(job.origin, connection=conn).key, job.id) is not None
    if status in (JobStatus.SCHEDULED, JobStatus.DEFERRED):
        return True
    if status == JobStatus.STARTED and job.started_at is not None:
        started = job.started_at.replace(tzinfo=UTC)
        return (datetime.now(UTC) - started).total_seconds() < settings.job_lease_s
    return False


def heal(catalog: Catalog, settings: Settings, startup: bool = False) -> list[str]:
    """Start again every chain that died (``startup``: this process just started); returns the
    repositories started again (those out of retries are set to ``error`` with the reason)."""
    try:
        return _heal(catalog, settings, startup)
    except RedisError as exc:
        raise Unavailable(f"the job queue (Redis) is not reachable: {exc}") from exc


def _heal(catalog: Catalog, settings: Settings, startup: bool) -> list[str]:
    rows = catalog.chains.unfinished(IN_PROGRESS)
    waiting = refs.waiting(catalog)  # their repository's chain queues them when it completes
    healed = []
    for row in rows:
        name = row.name
        if name in waiting:
            continue
        alive = _alive(name, row.lease_until, settings, startup)
        if alive or not _first_healer(name, settings):
            continue
        attempts = row.attempts + 1
        if attempts > settings.job_retries:
            log.error("indexing %s died %d times; giving up", name, attempts)
            catalog.chains.give_up(
                name,
                f"indexing was interrupted and started again {attempts - 1} time(s), "
                f"never finishing (last seen: {row.progress or 'queued'}): its worker was "
                f"killed or its job lost; POST /repos/{name}/reindex to try again",
            )
            continue
        log.warning("indexing %s died (attempt %d); starting it again", name, attempts)
        catalog.chains.set_attempts(name, attempts)
        enqueue(IndexRepo(repo=name), settings)
        healed.append(name)
    return healed


def _first_healer(name: str, settings: Settings) -> bool:
    """Whether this process heals ``name`` now (two workers healing at once would start the chain
    twice)."""
    if not settings.redis_url:
        return True
    from redis import Redis

    key = f"coderag:heal:{name}"
    ttl = max(1, int(settings.job_lease_s))
    return bool(Redis.from_url(settings.redis_url).set(key, "1", nx=True, ex=ttl))


def heal_forever(settings: Settings, stop: threading.Event) -> None:
    """Heal every ``job_lease_s`` seconds until ``stop`` is set (a worker's background thread).
    It keeps its own catalog: a forked rq work horse must not inherit one in use."""
    catalog = Catalog.open(settings.database)
    try:
        while not stop.wait(settings.job_lease_s):
            try:
                heal(catalog, settings)
            except Exception:
                log.exception("healing failed; trying again in %ss", settings.job_lease_s)
    finally:
        catalog.close()
