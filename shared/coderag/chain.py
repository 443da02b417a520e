"""A repository's indexing chain (parse → embed → refresh), as every service's job runs a stage of
it, and the state the chain keeps in its own table (its SQL is ``coderag.store.chain_rows``, on
the ``chains`` table; what it publishes goes to the repository's row through
``coderag.store.repos``).

- **The stage context** (``run``): the repository must still be the one the job was queued for,
  the chain must hold the lease (the first stage takes it), the lease is renewed while the stage
  works, a failure is recorded and re-raised, and the stage queues the next job. A stage that
  must not run answers ``Skipped(repo, skipped=reason)``.
- **The lease**: one chain per repository at a time. A worker killed with ``kill -9`` stops
  renewing, its lease runs out, and ``coderag.queue.heal`` starts the chain again. A reindex
  asked for while a chain runs sets ``pending`` and returns: the chain runs once more when it
  ends, so requests queue once and never run in parallel.
- **Stages**: the keyword, symbol and exact index is published as soon as the parse ends (the
  repository is then ``ready``), vectors follow space by space in batches, and the last job
  marks the repository ``complete``. ``stages`` is a JSON object ``{space: {"done", "total",
  "started"}}``; a space is ready when ``done`` reached ``total`` (or the repository is complete).
- **Progress**: stored on the repository row (throttled) and passed to listeners such as the
  CLI's progress bars and /metrics.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from coderag import routes
from coderag import spaces as coderag_spaces
from coderag.errors import NotFound
from coderag.jobs import ChainJob, Job, Result, Skipped
from coderag.queue import enqueue
from coderag.settings import Settings, get_settings
from coderag.store import Catalog, get_catalog, refs
from coderag.store.database import DatabaseError
from coderag.store.repos import SpaceProgress

log = logging.getLogger(__name__)

Cleanup = Callable[[str | None], None]
"""What a stage undoes when its repository is deleted, given the registration it wrote for."""

Listener = Callable[[str, str, int, int], None]
"""A progress listener, called as listener(repo, stage, done, total)."""

VECTOR_ROUTES = routes.VECTOR
"""Routes that read vectors, with the space they read; every other route works once the
keyword stage is published."""

WRITE_EVERY_S = 1.0
"""Least interval between progress writes to the catalog."""

R = TypeVar("R", bound=Result)
"""What a stage's work returns."""


class Skip(Exception):
    """The stage must not run (or go on): ``reason`` is ``deleted``, ``running`` or
    ``superseded``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Stage:
    """A stage under way: its repository, registration and chain lease token."""

    catalog: Catalog
    settings: Settings
    repo: str
    registration: str
    token: str | None

    @contextmanager
    def renewing(self) -> Iterator[None]:
        """Keep the chain's lease alive while the body runs."""
        with renewing(self.catalog, self.repo, self.token, self.settings.job_lease_s):
            yield

    def next(self, job: Job) -> None:
        """Queue the chain's next job."""
        enqueue(job)


def _begin(job: Job, first: bool) -> Stage:
    """The stage of ``job``, its lease taken or renewed; NotFound when the repository is gone,
    Skip when the stage must not run."""
    catalog, settings = get_catalog(), get_settings()
    registration = catalog.registration(job.repo)
    if job.registration not in (None, registration):
        raise Skip("deleted")  # the name was registered again: leave that repository be
    if first:
        token = start_chain(catalog, job.repo, settings.job_lease_s)
        if token is None:
            raise Skip("running")  # it runs once more when that chain ends
    else:
        token = job.lease if isinstance(job, ChainJob) else None
        if not continue_chain(catalog, job.repo, token, settings.job_lease_s):
            raise Skip("superseded")
    return Stage(catalog, settings, job.repo, registration, token)


def _deleted(job: Job, registration: str | None, on_deleted: Cleanup | None) -> Skipped:
    if on_deleted is not None:
        on_deleted(registration)
    return Skipped(repo=job.repo, skipped="deleted")


def run(
    job: Job,
    work: Callable[[Stage], R],
    *,
    first: bool = False,
    on_deleted: Cleanup | None = None,
) -> R | Skipped:
    """Run ``work`` as a stage of ``job``'s chain (``first``: start the chain). A repository
    deleted before or while it works (NotFound) skips it, after ``on_deleted`` with the
    registration known then; any other failure of ``work`` is recorded on the repository (an
    error once rq has no retry left), the lease let go, and the failure raised."""
    try:
        stage = _begin(job, first)
    except Skip as skip:
        return Skipped(repo=job.repo, skipped=skip.reason)
    except NotFound:
        return _deleted(job, job.registration, on_deleted)
    try:
        return work(stage)
    except Skip as skip:
        return Skipped(repo=job.repo, skipped=skip.reason)
    except NotFound:
        return _deleted(job, stage.registration, on_deleted)
    except Exception as exc:
        log.exception("%s of %s failed", type(job).__name__, job.repo)
        fail(stage.catalog, job.repo, stage.registration, stage.token, exc)
        raise


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
            _fail_waiting_refs(catalog, name, reason)
    except NotFound:
        pass


def _fail_waiting_refs(catalog: Catalog, name: str, reason: str) -> None:
    """The refs waiting for repository ``name``'s index to fork from it fail with it: nothing
    would queue them any more, and ``queued`` for ever says nothing."""
    for key in refs.waiting_on(catalog, name):
        ref = catalog.get_repo(key).branch
        error = (
            f"repository {name!r} failed to index ({reason}); reindex it, then POST "
            f"/repos/{name}/reindex?ref={ref} (or index the ref on its own now)"
        )
        with contextlib.suppress(NotFound):
            catalog.update_repo(key, None, status="error", error=error)


# --- the lease -----------------------------------------------------------------------------------


def start_chain(catalog: Catalog, name: str, lease_s: float) -> str | None:
    """Take the repository's lease for a new chain and return its token; None (and ``pending``
    set) when a live chain holds it."""
    now = time.time()
    return catalog.chains.claim(name, uuid.uuid4().hex, now, now + lease_s)


def continue_chain(catalog: Catalog, name: str, token: str | None, lease_s: float) -> bool:
    """Renew the lease for the next stage of chain ``token``; False when another chain took
    over (this one was given up for dead) and the stage must not run. A stage queued by an older
    version (no token) runs."""
    if token is None:
        return True
    return catalog.chains.renew(name, token, time.time() + lease_s)


@contextmanager
def renewing(catalog: Catalog, name: str, token: str | None, lease_s: float) -> Iterator[None]:
    """Keep the lease of chain ``token`` alive while the body runs."""
    if token is None:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(lease_s / 4):
            # a missed beat only shortens the lease
            with contextlib.suppress(*DatabaseError):
                catalog.chains.beat(name, token, time.time() + lease_s)

    thread = threading.Thread(target=beat, name=f"lease-{name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def release(catalog: Catalog, name: str, token: str | None) -> None:
    """Let a retry of a failed stage (or another chain) take the lease at once."""
    if token is not None:
        catalog.chains.release(name, token)


def finish_chain(catalog: Catalog, name: str, token: str | None) -> bool:
    """End chain ``token`` (the repository is ready); returns whether a reindex is pending."""
    return catalog.chains.finish(name, token)


# --- stages --------------------------------------------------------------------------------------


def spaces(settings: Settings) -> list[str]:
    """The vector spaces the embedder fills under these settings."""
    return coderag_spaces.filled(settings)


def publish_keywords(catalog: Catalog, name: str, registration: str, settings: Settings) -> bool:
    """After the parse: the new units searchable by keyword, symbol and exact name (a new
    generation, status ready), vectors owed in every space; False if the repository is gone."""
    files, units = catalog.counts(name)
    owed = {s: {"done": 0, "total": None, "started": None} for s in spaces(settings)}
    return catalog.chains.publish_keywords(name, registration, files, units, owed)


def advance(catalog: Catalog, name: str, space: str, done: int, total: int) -> None:
    """Record that ``done`` of the ``total`` vectors a space owes are written."""
    catalog.chains.advance(name, space, done, total)


def space_ready(state: Mapping[str, SpaceProgress], complete: bool, space: str) -> bool:
    """Whether every vector a space owes is written."""
    if complete:
        return True
    entry = state.get(space)
    if entry is None:  # not owed by this index (a space switched off, or an older row)
        return True
    return entry.total is not None and entry.done >= entry.total


def route_readiness(
    state: Mapping[str, SpaceProgress], complete: bool, routes: list[str]
) -> tuple[list[str], list[str]]:
    """(routes whose data is all in place, routes still waiting for vectors) among ``routes``;
    a waiting vector route already searches the batches written so far."""
    ready: list[str] = []
    missing: list[str] = []
    for route in routes:
        space = VECTOR_ROUTES.get(route)
        (missing if space and not space_ready(state, complete, space) else ready).append(route)
    return ready, missing


# --- progress ------------------------------------------------------------------------------------

_listeners: list[Listener] = []
_last: dict[str, float] = {}
_lock = threading.Lock()


def listen(listener: Listener) -> Callable[[], None]:
    """Register a progress listener; returns the function that removes it."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener)


def report(repo: str, stage: str, done: int, total: int) -> None:
    """Record that ``done`` of ``total`` items of a stage are finished."""
    for listener in list(_listeners):
        listener(repo, stage, done, total)
    now = time.monotonic()
    with _lock:
        if done < total and now - _last.get(repo, 0.0) < WRITE_EVERY_S:
            return
        _last[repo] = now

    # Best effort: the repository may just have been deleted.
    with contextlib.suppress(Exception):
        get_catalog().update_repo(repo, progress=f"{stage} {done}/{total}")
