"""When indexing breaks: a failed stage is recorded (an error only once rq has no retry left), and
repositories left ``queued`` or ``indexing`` by a killed worker or a lost job are started again,
at start-up and periodically by every worker, up to ``job_retries`` times before ``error``."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from redis.exceptions import RedisError

from coderag.errors import NotFound, Unavailable
from coderag.jobs import IndexRepo
from coderag.lease import release
from coderag.queue import JOB_KEY, enqueue, held_here
from coderag.settings import Settings
from coderag.store import Catalog, leases
from coderag.store.sqlite import Database

log = logging.getLogger(__name__)

IN_PROGRESS = ("queued", "indexing")
"""States a repository leaves only when its chain ends."""


def fail(catalog: Catalog, name: str, registration: str, token: str | None, exc: Exception) -> None:
    """Record a stage's failure: ``error`` with the reason once rq will not retry the job, else a
    note that it is being retried; the lease is let go so the retry can take it."""
    from rq import get_current_job

    release(catalog, name, token)
    job = get_current_job()
    reason = f"{type(exc).__name__}: {exc}"
    try:
        if job is not None and (job.retries_left or 0) > 0:
            catalog.update_repo(name, registration, error=f"retrying after {reason}")
        else:
            catalog.update_repo(name, registration, status="error", error=reason)
    except NotFound:
        pass


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
    job_id = conn.get(JOB_KEY.format(name))
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
    rows = leases.unfinished(catalog.db, IN_PROGRESS)
    healed = []
    for row in rows:
        name = row["name"]
        alive = _alive(name, row["lease_until"], settings, startup)
        if alive or not _first_healer(name, settings):
            continue
        attempts = row["attempts"] + 1
        if attempts > settings.job_retries:
            log.error("indexing %s died %d times; giving up", name, attempts)
            catalog.update_repo(
                name,
                status="error",
                attempts=0,
                lease_until=None,
                error=f"indexing was interrupted and started again {attempts - 1} time(s), "
                f"never finishing (last seen: {row['progress'] or 'queued'}): its worker was "
                f"killed or its job lost; POST /repos/{name}/reindex to try again",
            )
            continue
        log.warning("indexing %s died (attempt %d); starting it again", name, attempts)
        catalog.update_repo(name, attempts=attempts, lease_until=None)
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
    catalog = Catalog(Database(settings.db_path))
    try:
        while not stop.wait(settings.job_lease_s):
            try:
                heal(catalog, settings)
            except Exception:
                log.exception("healing failed; trying again in %ss", settings.job_lease_s)
    finally:
        catalog.db.close()
