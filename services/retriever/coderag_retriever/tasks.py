"""Retriever jobs: after units or vectors change, publish a new generation of the repository."""

from __future__ import annotations

from typing import Any

from coderag import lease
from coderag.errors import NotFound
from coderag.jobs import IndexRepo, RefreshRepo, handles
from coderag.queue import enqueue
from coderag.settings import get_settings
from coderag.store import get_catalog, stage_rows
from coderag_retriever.clustering import refresh
from coderag_retriever.index import get_index_cache


@handles(RefreshRepo)
def refresh_repo(job: RefreshRepo) -> dict[str, Any]:
    """Refresh clusters (when the cluster route is on), then mark the repository ready with fresh
    counts; in-process, rebuild its index now."""
    name = job.repo
    catalog = get_catalog()
    try:
        reg = catalog.registration(name)
    except NotFound:
        return {"repo": name, "skipped": "deleted"}
    if job.registration not in (None, reg):
        return {"repo": name, "skipped": "deleted"}
    settings = get_settings()
    if not lease.continue_chain(catalog, name, job.lease, settings.job_lease_s):
        return {"repo": name, "skipped": "superseded"}
    files, units = catalog.counts(name)
    if settings.weights().get("cluster", 0.0) > 0:
        with lease.renewing(catalog, name, job.lease, settings.job_lease_s):
            refresh(catalog, name, settings)

    if not stage_rows.publish_complete(catalog.db, name, reg, files, units, job.commit):
        return {"repo": name, "skipped": "deleted"}
    if lease.finish_chain(catalog, name, job.lease):
        enqueue(IndexRepo(repo=name))  # a reindex asked for while this chain ran
    if not settings.redis_url:
        get_index_cache().get(catalog, name)
    return {"repo": name, "files": files, "units": units}
