"""Nothing is lost when things fail: rq workers killed with SIGKILL, Redis down or restarted,
a server restarted mid-index; one indexing chain per repository at a time."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.registry import FinishedJobRegistry, StartedJobRegistry

from coderag.settings import get_settings
from coderag.store import get_catalog, get_vectors
from coderag.store.repos import Repo
from coderag_app.server import create_app
from harness.procs import RedisServer, free_port, kill9, start_worker, stop, worker_env
from harness.snapshot import snapshot
from tests.conftest import commit_all

pytestmark = pytest.mark.slow

LEASE_S = "10"


def make_repo(root: Path, modules: int = 24) -> Path:
    """A repository of ``modules`` Python files of four functions each."""
    write_stages(root, modules)
    commit_all(git.Repo.init(root), "stages")
    return root


def write_stages(root: Path, modules: int) -> None:
    """Write ``modules`` Python files of four functions each under ``root/svc``."""
    (root / "svc").mkdir(parents=True, exist_ok=True)
    for m in range(modules):
        funcs = "\n\n".join(
            f"def step_{m}_{f}(order, ledger):\n"
            f'    """Step {f} of stage {m}: post the order to the ledger."""\n'
            f"    total = order.amount * {f + 1} + {m}\n"
            f"    return ledger.post(order.id, total)\n"
            for f in range(4)
        )
        (root / "svc" / f"stage_{m:03d}.py").write_text(funcs + "\n")


def finished_chain(repo: Repo) -> bool:
    """Whether a repository's chain ended: complete, or failed."""
    return repo.status == "error" or (repo.status == "ready" and repo.complete)


def wait_for(name: str, check: Callable[[Repo], bool], timeout: float = 600) -> Repo:
    """Poll the catalog until ``check`` holds for the repository."""
    deadline = time.monotonic() + timeout
    repo = None
    while time.monotonic() < deadline:
        repo = get_catalog().get_repo(name)
        if check(repo):
            return repo
        time.sleep(0.2)
    raise AssertionError(f"{name}: gave up waiting; last state {repo}")


@pytest.fixture
def redis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisServer]:
    """A redis-server with the append-only file on, this test's REDIS_URL."""
    server = RedisServer(tmp_path / "redis").start()
    monkeypatch.setenv("REDIS_URL", server.url)
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    monkeypatch.setenv("CODERAG_JOB_LEASE_S", LEASE_S)
    get_settings.cache_clear()
    yield server
    server.stop()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[[], object]]:
    """Start ``coderag worker`` processes; every one left is stopped at the end."""
    started = []

    def start(**env: str):
        proc = start_worker(worker_env(**env), tmp_path / "worker.log")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        stop(proc)


def api() -> TestClient:
    """The API alone (jobs go to Redis, the worker processes run them)."""
    return TestClient(create_app(("coderag_parser", "coderag_retriever")))


def test_a_killed_worker_is_retried_and_ends_equal_to_a_full_index(
    redis: RedisServer, workers, tmp_path: Path
) -> None:
    root = make_repo(tmp_path / "shop")
    first = workers()
    with api() as client:
        assert client.post("/repos", json={"name": "killed", "path": str(root)}).status_code == 202
        embedding = StartedJobRegistry(
            queue=Queue("embedder", connection=Redis.from_url(redis.url))
        )
        wait_for("killed", lambda r: bool(embedding.get_job_ids()))
        kill9(first)  # mid-embedding: units recorded, vectors not (or half) written
        # keyword stage published (ready), vectors still owed: healing must still restart it
        killed = get_catalog().get_repo("killed")
        assert killed.status in ("indexing", "ready") and not killed.complete, killed
        workers()
        repo = wait_for("killed", finished_chain)
        assert repo.status == "ready", repo
        client.post("/repos", json={"name": "full", "path": str(root)})
        assert wait_for("full", finished_chain).status == "ready"
    assert snapshot("killed") == snapshot("full")
    assert get_vectors().hashes("killed") == get_catalog().unit_hashes("killed")
    assert get_catalog().get_repo("killed").units == get_catalog().get_repo("full").units >= 96


def test_a_chain_killed_more_often_than_retries_allow_ends_in_error(
    redis: RedisServer, workers, tmp_path: Path
) -> None:
    root = make_repo(tmp_path / "shop")
    first = workers(CODERAG_JOB_RETRIES="0")
    with api() as client:
        client.post("/repos", json={"name": "doomed", "path": str(root)})
        embedding = StartedJobRegistry(
            queue=Queue("embedder", connection=Redis.from_url(redis.url))
        )
        # killed inside a job: waiting on the status alone let a fast chain finish first
        wait_for("doomed", lambda r: bool(embedding.get_job_ids()))
        kill9(first)
        workers(CODERAG_JOB_RETRIES="0")
        repo = wait_for("doomed", finished_chain)
    assert repo.status == "error", repo
    assert "interrupted" in repo.error and "reindex" in repo.error, repo.error


def test_a_reindex_while_one_runs_is_queued_once_never_in_parallel(
    redis: RedisServer, workers, tmp_path: Path
) -> None:
    root = make_repo(tmp_path / "shop", modules=24)
    workers(), workers()  # two workers: a second chain could run beside the first
    with api() as client:
        client.post("/repos", json={"name": "busy", "path": str(root)})
        wait_for("busy", lambda r: r.status in ("indexing", "ready"))
        assert client.post("/repos/busy/reindex").status_code == 202
        assert client.post("/repos/busy/reindex").status_code == 202
        wait_for("busy", finished_chain)
        conn = Redis.from_url(redis.url)
        time.sleep(1)

        def finished(queue: str) -> list[Job]:
            reg = FinishedJobRegistry(queue=Queue(queue, connection=conn))
            jobs = [Job.fetch(i, connection=conn) for i in reg.get_job_ids()]
            return sorted(jobs, key=lambda j: j.started_at)

        deadline = time.monotonic() + 300
        while len(finished("retriever")) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)  # the pending reindex: one more chain after the first
        parses = finished("parser")
        ran = [j for j in parses if "skipped" not in j.return_value()]
        skipped = [j for j in parses if j.return_value().get("skipped") == "running"]
        refreshes = finished("retriever")
    assert len(ran) == 2 and len(skipped) == 2, [j.return_value() for j in parses]
    assert len(refreshes) == 2
    assert ran[1].started_at >= refreshes[0].ended_at, "the second chain began after the first"
    assert get_catalog().get_repo("busy").status == "ready"


def test_post_repos_while_redis_is_down_is_503_and_registers_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    get_settings.cache_clear()
    root = make_repo(tmp_path / "shop", modules=1)
    get_catalog().create_repo("stuck", str(root), None, None)  # left queued by an earlier crash
    with api() as client:  # start-up heals what it can and does not fail without Redis
        r = client.post("/repos", json={"name": "new", "path": str(root)})
        assert r.status_code == 503, r.text
        assert "Redis" in r.json()["detail"]
        assert [x["name"] for x in client.get("/repos").json()] == ["stuck"]
        assert client.post("/repos/stuck/reindex").status_code in (409, 503)
        assert client.get("/health").json()["dependencies"]["redis"] != "ok"


def test_a_redis_restart_loses_no_queued_job_and_a_redelivery_after_a_loss_indexes(
    redis: RedisServer, workers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_webhooks import SECRET, github_push, push_payload

    monkeypatch.setenv("CODERAG_WEBHOOK_SECRET", SECRET)
    get_settings.cache_clear()
    root = make_repo(tmp_path / "shop", modules=2)
    local = git.Repo(root)
    local.create_remote("origin", "https://example.com/acme/shop.git")
    branch = local.active_branch.name
    with api() as client:
        client.post("/repos", json={"name": "hooked", "path": str(root), "branch": branch})
        worker = workers()
        assert wait_for("hooked", finished_chain).commit == local.head.commit.hexsha
        stop(worker)

        (root / "svc" / "refunds.py").write_text("def refund(order):\n    return -order.amount\n")
        sha = commit_all(local, "refunds")
        payload = push_payload("https://example.com/acme/shop", branch, sha)
        status, body, _ = github_push(client, payload, "delivery-1")
        assert status == 202 and body["status"] == "queued", body
        redis.stop()  # a restart: the queued job is in the append-only file
        redis.start()
        assert Queue("parser", connection=Redis.from_url(redis.url)).count == 1
        worker = workers()
        assert wait_for("hooked", lambda r: r.commit == sha and r.status == "ready")
        stop(worker)

        (root / "svc" / "refunds.py").write_text("def refund(order):\n    return 0\n")
        sha = commit_all(local, "no refunds")
        payload = push_payload("https://example.com/acme/shop", branch, sha)
        assert github_push(client, payload, "delivery-2")[1]["status"] == "queued"
        redis.stop(kill=True)
        for f in redis.data.rglob("*"):  # a crash that lost the data (no append-only file)
            if f.is_file():
                f.unlink()
        redis.start()
        assert Queue("parser", connection=Redis.from_url(redis.url)).count == 0
        status, body, _ = github_push(client, payload, "delivery-2")  # the provider redelivers
        assert body["status"] == "queued", body
        workers()
        assert wait_for("hooked", lambda r: r.commit == sha and r.status == "ready")


def test_a_server_restart_mid_index_heals_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()
    root = make_repo(tmp_path / "shop", modules=2)
    catalog = get_catalog()
    catalog.create_repo("restarted", str(root), None, None)
    # what a server killed mid-index leaves: indexing, with a lease its dead process held
    catalog.update_repo("restarted", status="indexing")
    assert catalog.chains.claim("restarted", "dead", time.time(), time.time() + 3600) == "dead"
    from tests.conftest import wait_ready

    with TestClient(create_app()) as client:
        assert wait_ready(client, "restarted")["status"] == "ready"
