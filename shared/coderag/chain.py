"""One stage of a repository's indexing chain (parse → embed → refresh), as every service's job
runs it: the repository must still be the one the job was queued for, the chain must hold the
lease (the first stage takes it), the lease is renewed while the stage works, a failure is
recorded and re-raised, and the stage queues the next job. A stage that must not run answers
``{"repo", "skipped": reason}``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from coderag import lease, recovery
from coderag.errors import NotFound
from coderag.jobs import Job
from coderag.queue import enqueue
from coderag.settings import Settings, get_settings
from coderag.store import Catalog, get_catalog

log = logging.getLogger(__name__)

Cleanup = Callable[[str | None], None]
"""What a stage undoes when its repository is deleted, given the registration it wrote for."""


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
        with lease.renewing(self.catalog, self.repo, self.token, self.settings.job_lease_s):
            yield

    def next(self, job: Job) -> None:
        """Queue the chain's next job."""
        enqueue(job)


def _begin(job: Job, first: bool) -> Stage:
    """The stage of ``job``, its lease taken or renewed; NotFound when the repository is gone,
    Skip when the stage must not run."""
    catalog, settings = get_catalog(), get_settings()
    registration = catalog.registration(job.repo)
    if getattr(job, "registration", None) not in (None, registration):
        raise Skip("deleted")  # the name was registered again: leave that repository be
    if first:
        token = lease.start_chain(catalog, job.repo, settings.job_lease_s)
        if token is None:
            raise Skip("running")  # it runs once more when that chain ends
    else:
        token = getattr(job, "lease", None)
        if not lease.continue_chain(catalog, job.repo, token, settings.job_lease_s):
            raise Skip("superseded")
    return Stage(catalog, settings, job.repo, registration, token)


def _deleted(job: Job, registration: str | None, on_deleted: Cleanup | None) -> dict[str, Any]:
    if on_deleted is not None:
        on_deleted(registration)
    return {"repo": job.repo, "skipped": "deleted"}


def run(
    job: Job,
    work: Callable[[Stage], dict[str, Any]],
    *,
    first: bool = False,
    on_deleted: Cleanup | None = None,
) -> dict[str, Any]:
    """Run ``work`` as a stage of ``job``'s chain (``first``: start the chain). A repository
    deleted before or while it works (NotFound) skips it, after ``on_deleted`` with the
    registration known then; any other failure of ``work`` is recorded on the repository (an
    error once rq has no retry left), the lease let go, and the failure raised."""
    try:
        stage = _begin(job, first)
    except Skip as skip:
        return {"repo": job.repo, "skipped": skip.reason}
    except NotFound:
        return _deleted(job, getattr(job, "registration", None), on_deleted)
    try:
        return work(stage)
    except Skip as skip:
        return {"repo": job.repo, "skipped": skip.reason}
    except NotFound:
        return _deleted(job, stage.registration, on_deleted)
    except Exception as exc:
        log.exception("%s of %s failed", type(job).__name__, job.repo)
        recovery.fail(stage.catalog, job.repo, stage.registration, stage.token, exc)
        raise
