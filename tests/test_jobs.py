"""Typed job payloads (issue 11): each job names its service's queue, each service registers its
own handlers, and an rq worker of one service runs that service's jobs through its registry and
queues the next stage, typed, on the next service's queue (real redis-server, real worker)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError
from redis import Redis
from rq import Queue

from coderag import jobs
from coderag.jobs import JOB_TYPES, EmbedFiles, IndexRepo, RefreshRepo
from coderag.queue import JOB_KEY, PERFORM, enqueue, perform
from coderag.settings import get_settings
from coderag.store import get_catalog
from harness.procs import worker_env

WORKER = "import sys; from coderag_app.cli import main; sys.exit(main(sys.argv[1:]))"


def test_each_job_is_handled_by_the_service_of_its_queue() -> None:
    handlers = jobs.registered()
    assert set(handlers) == set(JOB_TYPES)
    for name, kind in JOB_TYPES.items():
        assert handlers[name].__module__ == f"coderag_{kind.queue}.tasks", name
    assert {k.queue for k in JOB_TYPES.values()} == {"parser", "embedder", "retriever"}


def test_a_payload_with_an_unknown_or_missing_field_is_refused_before_queueing() -> None:
    with pytest.raises(ValidationError, match="repos"):
        IndexRepo(repos="svc")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="repo"):
        EmbedFiles(files=["a.py"])  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="lease"):
        perform(RefreshRepo.job, {"repo": "svc", "lease": ["many"]})


def test_a_job_queued_by_an_older_version_runs_without_the_fields_since_dropped() -> None:
    old = {"repo": "svc", "registration": "r", "lease": "t", "files": ["a.py"], "removed": [],
           "stale_ids": [], "commit": "abc", "full_walk": False, "vectors": 3}  # fmt: skip
    assert RefreshRepo.from_queue(old) == RefreshRepo(
        repo="svc", registration="r", lease="t", commit="abc"
    )


def test_a_handler_takes_only_its_own_job_model() -> None:
    with pytest.raises(TypeError, match="runs RefreshRepo, not IndexRepo"):
        jobs.handler(RefreshRepo.job)(IndexRepo(repo="svc"))


def test_an_unknown_job_name_or_a_job_nobody_here_runs_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match="not a coderag job"):
        perform("coderag_parser.tasks.index_repo", {"repo": "svc"})
    monkeypatch.setattr(jobs, "_HANDLERS", {})
    with pytest.raises(LookupError, match="'parser' queue"):
        enqueue(IndexRepo(repo="svc"))


def test_with_redis_a_process_registers_only_the_services_it_runs(redis_url: str) -> None:
    code = (
        "from coderag import jobs; from coderag_app.server import load_jobs; import sys; "
        "load_jobs(('coderag_parser',)); "
        "print(sorted(jobs.registered()), 'coderag_embedder.tasks' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=worker_env(REDIS_URL=redis_url),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["['parser.index_repo']", "False"], out


@pytest.mark.slow
def test_a_parser_worker_runs_its_job_and_queues_the_embedders_typed(
    redis_url: str, sample_repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    get_settings.cache_clear()
    conn = Redis.from_url(redis_url)
    conn.flushdb()
    get_catalog().create_repo("typed", str(sample_repo), None, None)
    job_id = enqueue(IndexRepo(repo="typed"))
    queued = Queue("parser", connection=conn).jobs
    assert [(j.id, j.func_name, j.args) for j in queued] == [
        (job_id, PERFORM, ("parser.index_repo", {"repo": "typed", "registration": None}))
    ]
    assert conn.get(JOB_KEY.format("typed")).decode() == job_id
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        subprocess.run(
            [sys.executable, "-c", WORKER, "worker", "parser", "--burst"],
            env=worker_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=300,
            check=True,
        )
    assert Queue("parser", connection=conn).count == 0, log.read_text()
    (embed,) = Queue("embedder", connection=conn).jobs
    name, payload = embed.args
    assert embed.func_name == PERFORM and name == EmbedFiles.job
    assert EmbedFiles.model_validate(payload).files, json.dumps(payload)
    assert payload["registration"] == get_catalog().registration("typed")
    assert "src/go/sample.go" in payload["files"]
