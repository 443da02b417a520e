"""Typed job payloads, their results, and the registry of their handlers.

Each job is a pydantic model naming the service whose queue runs it and a stable job name, and
carrying only what its handler reads; the service registers the function that runs it
(``@handles(IndexRepo)``) when its own tasks module is imported, so a job is queued by name
without the sender importing the receiver. A handler takes its job model and returns a result
model; ``coderag.queue`` turns both into JSON once, at rq's boundary, and passes the models
themselves in-process. The composition root (``coderag_app.server.load_jobs``, the rq worker)
imports the services whose jobs it runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, Self, TypeVar

from pydantic import BaseModel, ConfigDict


class Job(BaseModel):
    """A queued job's payload; ``queue`` is the owning service's rq queue, ``job`` its name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    queue: ClassVar[str]
    job: ClassVar[str]

    repo: str
    registration: str | None = None

    @classmethod
    def from_queue(cls, payload: dict[str, Any]) -> Self:
        """The job a queue carried, validated; a field this version no longer sends (a job
        queued by an older version during an upgrade) is ignored rather than failing the job."""
        return cls.model_validate({k: v for k, v in payload.items() if k in cls.model_fields})


class IndexRepo(Job):
    """Bring a repository's units up to date with its tree (the first stage of a chain)."""

    queue: ClassVar[str] = "parser"
    job: ClassVar[str] = "parser.index_repo"


class ChainJob(Job):
    """A later stage of a chain: it runs under the lease its chain took (None: queued by an
    older version, which runs)."""

    lease: str | None = None


class EmbedFiles(ChainJob):
    """Embed the units of changed files, drop stale vectors, repair the collection."""

    queue: ClassVar[str] = "embedder"
    job: ClassVar[str] = "embedder.embed_files"

    files: list[str] = []
    stale_ids: list[str] = []
    commit: str | None = None


class RefreshRepo(ChainJob):
    """Publish a new generation of the repository (the last stage of a chain)."""

    queue: ClassVar[str] = "retriever"
    job: ClassVar[str] = "retriever.refresh_repo"

    commit: str | None = None


JOB_TYPES: dict[str, type[Job]] = {t.job: t for t in (IndexRepo, EmbedFiles, RefreshRepo)}
"""Every job model by its job name."""


class Result(BaseModel):
    """What a job's handler returns (rq keeps it as JSON, the CLI and tests read it)."""

    model_config = ConfigDict(frozen=True)

    repo: str


class Skipped(Result):
    """The stage did not run: ``skipped`` is ``deleted``, ``running`` or ``superseded``."""

    skipped: str


class Parsed(Result):
    """A parse: what changed since the last index, and the commit indexed."""

    files: list[str]
    removed: list[str]
    stale_ids: list[str]
    commit: str | None
    full_walk: bool


class Embedded(Result):
    """An embed stage: vectors written, of them encoded now and read from the cache."""

    vectors: int
    encoded: int
    cached: int


class Refreshed(Result):
    """A published generation: the repository's indexed files and units."""

    files: int
    units: int


Handler = Callable[[Job], Result]
"""What the queue calls: a job model in (of the kind it was registered for), a result out."""

_HANDLERS: dict[str, Handler] = {}


J = TypeVar("J", bound=Job)
"""A job model."""

R = TypeVar("R", bound=Result)
"""A result model."""


def handles(kind: type[J]) -> Callable[[Callable[[J], R]], Callable[[J], R]]:
    """Register the decorated function, which takes its job model, as the handler of ``kind`` in
    this process."""

    def register(fn: Callable[[J], R]) -> Callable[[J], R]:
        @functools.wraps(fn)
        def run(job: Job) -> Result:
            if not isinstance(job, kind):
                raise TypeError(f"{kind.job} runs {kind.__name__}, not {type(job).__name__}")
            return fn(job)

        _HANDLERS[kind.job] = run
        return fn

    return register


def job_type(name: str) -> type[Job]:
    """The job model of a job name."""
    try:
        return JOB_TYPES[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a coderag job (known: {sorted(JOB_TYPES)})") from None


def handler(name: str) -> Handler:
    """The function registered for a job name in this process."""
    job_type(name)
    try:
        return _HANDLERS[name]
    except KeyError:
        raise LookupError(
            f"no handler for job {name!r} in this process: the composition root imports the "
            f"service that runs the {JOB_TYPES[name].queue!r} queue (coderag_app.server.load_jobs)"
        ) from None


def registered() -> dict[str, Handler]:
    """The handlers registered in this process, by job name."""
    return dict(_HANDLERS)
