"""/metrics in Prometheus text: HTTP metrics from the instrumentator, audited-call latency and
outcomes, job and queue counts, index stage durations and embed throughput, and per-repository
units and files read from the catalog at scrape time, and vectors counted in Chroma only when a
repository's index has moved since the last scrape. /metrics takes the API's tokens; its
per-repository gauges show a reader only the repositories its grants let it read."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from fastapi import Depends, FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from coderag import audit, chain, queue
from coderag.deps import current_principal
from coderag.settings import Settings, get_settings
from coderag.store import Catalog, get_catalog, get_vectors
from coderag.store.vectors import SPACE_PREFIXES

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
"""Seconds; /search lives in the first half, /ask with a model in the second."""

QUEUES = ("parser", "embedder", "retriever", "generator")
"""rq queue names whose depth is reported."""


class _Index(Collector):
    """Gauges read at scrape time: repositories, units, files, vectors, queue depth, jobs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._vectors: dict[str, tuple[tuple, dict[str, int]]] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """One family per quantity."""
        settings = get_settings()
        catalog = get_catalog(settings)
        units = GaugeMetricFamily("coderag_repo_units", "Indexed units", labels=["repo"])
        files = GaugeMetricFamily("coderag_repo_files", "Indexed files", labels=["repo"])
        skipped = GaugeMetricFamily("coderag_repo_skipped_files", "Skipped files", labels=["repo"])
        ready = GaugeMetricFamily(
            "coderag_repo_status", "1 for the repository's status", labels=["repo", "status"]
        )
        vectors = GaugeMetricFamily(
            "coderag_repo_vectors", "Vectors per space", labels=["repo", "space"]
        )
        repos = catalog.list_repos()
        counts = self._vector_counts(catalog, settings)
        for repo in repos:
            units.add_metric([repo.name], repo.units)
            files.add_metric([repo.name], repo.files)
            skipped.add_metric([repo.name], repo.skipped)
            ready.add_metric([repo.name, repo.status], 1)
            for space, n in counts.get(repo.name, {}).items():
                vectors.add_metric([repo.name, space], n)
        yield from (units, files, skipped, ready, vectors)
        yield from _queues(settings.redis_url)

    def _vector_counts(self, catalog: Catalog, settings: Settings) -> dict[str, dict[str, int]]:
        """Vectors per repository and space: Chroma's count of a collection is kept with the
        index version it was read at, and read again only once that version moves (a count of
        every collection on every scrape cost each scrape a Chroma call per collection)."""
        versions = catalog.index_versions()
        with self._lock:
            for name in set(self._vectors) - set(versions):
                del self._vectors[name]
            stale = [n for n, v in versions.items() if self._vectors.get(n, ((),))[0] != v]
        if stale:
            store = get_vectors(settings)
            for name in stale:
                found = {space: store.count(name, space) for space in SPACE_PREFIXES}
                with self._lock:
                    self._vectors[name] = (versions[name], found)
        with self._lock:
            return {name: dict(found) for name, (_, found) in self._vectors.items()}


def _queues(redis_url: str | None) -> Iterator[GaugeMetricFamily]:
    depth = GaugeMetricFamily("coderag_queue_depth", "Jobs waiting", labels=["queue"])
    jobs = GaugeMetricFamily("coderag_jobs", "Jobs by outcome", labels=["queue", "outcome"])
    if redis_url:
        from redis import Redis
        from rq import Queue

        conn = Redis.from_url(redis_url, socket_timeout=2)
        for name in QUEUES:
            q = Queue(name, connection=conn)
            depth.add_metric([name], q.count)
            jobs.add_metric([name, "done"], q.finished_job_registry.count)
            jobs.add_metric([name, "failed"], q.failed_job_registry.count)
    else:
        depth.add_metric(["in-process"], queue.pending())
        for outcome, count in queue.OUTCOMES.items():
            jobs.add_metric(["in-process", outcome], count)
    yield depth
    yield jobs


class Metrics:
    """The process's registry and the histograms and counters fed by audit rows and progress."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "coderag_call_seconds",
            "Audited call latency",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.calls = Counter(
            "coderag_calls",
            "Audited calls by outcome (ok, refused, error ...)",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.stage = Histogram(
            "coderag_index_stage_seconds",
            "Index stage durations",
            ["stage"],
            buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400),
            registry=self.registry,
        )
        self.embedded = Counter(
            "coderag_units_embedded",
            "Units encoded, by vector space (rate = throughput)",
            ["space"],
            registry=self.registry,
        )
        self.registry.register(_Index())
        self._started: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def on_call(self, endpoint: str, status: str, response_ms: float) -> None:
        """An audit row was written."""
        self.latency.labels(endpoint).observe(response_ms / 1000)
        self.calls.labels(endpoint, "error" if status.startswith("error") else status).inc()

    def on_progress(self, repo: str, stage: str, done: int, total: int) -> None:
        """A job reported progress: time each stage, count embedded units."""
        now = time.monotonic()
        with self._lock:
            began, last = self._started.setdefault((repo, stage), (now, 0))
            self._started[(repo, stage)] = (began, done)
        if stage.startswith("embedding") and done > last:
            self.embedded.labels(stage.removeprefix("embedding").strip(" ()")).inc(done - last)
        if done >= total:
            with self._lock:
                self._started.pop((repo, stage), None)
            self.stage.labels(stage.split(" ")[0]).observe(now - began)


def install(app: FastAPI) -> Metrics:
    """Instrument ``app`` and serve /metrics from this process's registry."""
    from prometheus_fastapi_instrumentator import Instrumentator

    metrics = Metrics()
    audit.observers.append(metrics.on_call)
    chain.listen(metrics.on_progress)
    Instrumentator(registry=metrics.registry, excluded_handlers=["/metrics"]).instrument(
        app
    ).expose(
        app,
        endpoint="/metrics",
        include_in_schema=False,
        # names of repositories and refs are the API's to tell: the same tokens (any role), and
        # with CODERAG_GRANTS a reader's scrape lists only the repositories it may read (the
        # catalog's listing is filtered by the caller's grants, grants_http)
        dependencies=[Depends(current_principal)],
    )
    return metrics
