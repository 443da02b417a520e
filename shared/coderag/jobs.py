"""Typed job payloads and the registry of their handlers.

Each job is a pydantic model naming the service whose queue runs it and a stable job name; the
service registers the function that runs it (``@handles(IndexRepo)``) when its own tasks module is
imported, so a job is queued by name without the sender importing the receiver. The composition
root (``coderag_app.server.load_jobs``, the rq worker) imports the services whose jobs it runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

Handler = Callable[[dict[str, Any]], dict[str, Any]]
"""What the queue calls: the payload as a dict in, a JSON-able dict out (``handles`` wraps a
service's handler, which takes its job model)."""


class Job(BaseModel):
    """A queued job's payload; ``queue`` is the owning service's rq queue, ``job`` its name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    queue: ClassVar[str]
    job: ClassVar[str]

    repo: str


class IndexRepo(Job):
    """Bring a repository's units up to date with its tree (the first stage of a chain)."""

    queue: ClassVar[str] = "parser"
    job: ClassVar[str] = "parser.index_repo"

    registration: str | None = None


class EmbedFiles(Job):
    """Embed the units of changed files, drop stale vectors, repair the collection."""

    queue: ClassVar[str] = "embedder"
    job: ClassVar[str] = "embedder.embed_files"

    registration: str | None = None
    lease: str | None = None
    files: list[str] = []
    removed: list[str] = []
    stale_ids: list[str] = []
    commit: str | None = None
    full_walk: bool = False


class RefreshRepo(EmbedFiles):
    """Publish a new generation of the repository (the last stage of a chain)."""

    queue: ClassVar[str] = "retriever"
    job: ClassVar[str] = "retriever.refresh_repo"

    vectors: int = 0
    encoded: int = 0
    cached: int = 0


JOB_TYPES: dict[str, type[Job]] = {t.job: t for t in (IndexRepo, EmbedFiles, RefreshRepo)}
"""Every job model by its job name."""

_HANDLERS: dict[str, Handler] = {}


J = TypeVar("J", bound=Job)
"""A job model."""


def handles(
    kind: type[J],
) -> Callable[[Callable[[J], dict[str, Any]]], Callable[[J], dict[str, Any]]]:
    """Register the decorated function, which takes its job model, as the handler of ``kind`` in
    this process (the queue hands it the payload as a dict, validated here)."""

    def register(fn: Callable[[J], dict[str, Any]]) -> Callable[[J], dict[str, Any]]:
        @functools.wraps(fn)
        def run(payload: dict[str, Any]) -> dict[str, Any]:
            return fn(kind.model_validate(payload))

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
