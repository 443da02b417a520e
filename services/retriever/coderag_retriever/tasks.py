"""Retriever jobs: after units or vectors change, publish a new generation of the repository."""

from __future__ import annotations

import logging

from coderag import chain
from coderag.chain import Skip, Stage
from coderag.jobs import IndexRepo, Refreshed, RefreshRepo, Skipped, handles
from coderag.store import refs
from coderag_retriever.clustering import refresh
from coderag_retriever.index import get_index_cache

progress = logging.getLogger("coderag.index")
"""Says when a repository's index is complete (the server prints it: issue 43's second trial
found no line saying so)."""


@handles(RefreshRepo)
def refresh_repo(job: RefreshRepo) -> Refreshed | Skipped:
    """Refresh clusters (when the cluster route is on), then mark the repository ready with fresh
    counts; in-process, rebuild its index now."""
    return chain.run(job, lambda stage: _refresh(stage, job))


def _refresh(stage: Stage, job: RefreshRepo) -> Refreshed:
    catalog, settings, name = stage.catalog, stage.settings, stage.repo
    files, units = catalog.counts(name)
    if settings.weights().get("cluster", 0.0) > 0:
        with stage.renewing():
            refresh(catalog, name, settings)
    if not catalog.chains.publish_complete(name, stage.registration, files, units, job.commit):
        raise Skip("deleted")
    at = f" at {job.commit[:12]}" if job.commit else ""
    progress.info(
        "%s is indexed%s: %d files, %d units; every route is ready", name, at, files, units
    )
    if chain.finish_chain(catalog, name, stage.token):
        stage.next(IndexRepo(repo=name))  # a reindex asked for while this chain ran
    for key in refs.waiting_on(catalog, name):
        stage.next(IndexRepo(repo=key))  # forked from this index, now complete
    if not settings.redis_url:
        get_index_cache().get(catalog, name)
    return Refreshed(repo=name, files=files, units=units)
