"""Workers on several hosts: parser and embedder workers that share nothing but Redis,
PostgreSQL, the Chroma server and the git remote index a repository registered by URL to the
same result as an all-in-one index, and a host killed mid-index loses nothing; an API host with
no clone serves file lines, line history and health at the indexed commit.

A "host" is a set of processes with a data directory, HOME and TMPDIR of its own, none shared
with another host or the API; hosts reach the services over loopback on their own ports (each in
a network namespace of its own would need a bridge to reach them, and would test the kernel's
routing rather than what the workers read from disk).
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import git
import httpx
import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq import Queue, Worker
from rq.registry import StartedJobRegistry

from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.settings import get_settings
from coderag.store import get_catalog, get_vectors, reset_stores
from coderag.store.repos import Repo
from coderag_app.server import create_app
from coderag_parser import gitsync
from coderag_parser.trees import TREES_DIR
from harness.postgres import Postgres
from harness.procs import free_port, kill9, start_worker, stop
from harness.snapshot import snapshot
from tests.conftest import commit_all, copy_fixtures, wait_ready
from tests.liveserver import child_env, live_server, wait_complete
from tests.test_recovery import write_stages

QUERIES = [
    "post the order to the ledger",
    "step 3 of stage 7",
    "user store cache",
    "NewService constructor",
]
"""Queries whose /search results must be the same on both indexes."""

LEASE_S = "10"
"""A dead host's chain is started again after this many seconds without a heartbeat."""


def published(work: Path, bare: Path, message: str) -> git.Repo:
    """Commit everything in ``work`` on main and clone it to the bare repository ``bare``, which
    becomes its ``origin``."""
    repo = git.Repo.init(work)
    repo.git.symbolic_ref("HEAD", "refs/heads/main")
    commit_all(repo, message)
    git.Repo.clone_from(str(work), bare, bare=True)
    repo.create_remote("origin", str(bare))
    return repo


def bare_remote(tmp: Path, modules: int) -> Path:
    """A bare repository of every language fixture plus ``modules`` Python files, one commit on
    main, ready to serve over dumb HTTP (``git update-server-info``)."""
    work = tmp / "work"
    copy_fixtures(work)
    write_stages(work, modules)
    bare = tmp / "served" / "shop.git"
    published(work, bare, "shop")
    subprocess.run(["git", "-C", str(bare), "update-server-info"], check=True)
    return bare


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Say nothing per request."""


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[str]:
    """The git remote: a bare repository served read-only over HTTP on a loopback port (git's
    dumb protocol; ``http`` is a kind of URL ``CODERAG_URL_SCHEMES`` can allow)."""
    bare = bare_remote(tmp_path / "remote", modules=150)
    handler = partial(_Quiet, directory=str(bare.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/{bare.name}"
    server.shutdown()
    server.server_close()


def host_dirs(root: Path) -> dict[str, str]:
    """A host's own data directory, HOME and TMPDIR, as environment variables."""
    for sub in ("data", "home", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return {"HOME": str(root / "home"), "TMPDIR": str(root / "tmp")}


class Cluster:
    """The API server with a retriever worker on its host, and worker hosts that each run a
    parser and an embedder worker; every process is stopped at the end."""

    def __init__(self, tmp: Path, settings: dict[str, str]) -> None:
        self.tmp, self.settings = tmp, settings
        self.hosts: dict[str, list[subprocess.Popen]] = {}

    def env(self, host: str) -> dict[str, str]:
        """The environment of a process on ``host``."""
        root = self.tmp / host
        return child_env(root / "data", **host_dirs(root), **self.settings)

    def start_host(self, host: str, queues: tuple[str, ...] = ("parser", "embedder")) -> None:
        """Start one worker process per queue on ``host``."""
        env = self.env(host)
        log = self.tmp / f"{host}.log"
        self.hosts[host] = [start_worker(env, log, (q,)) for q in queues]

    def kill_host(self, host: str) -> None:
        """SIGKILL every worker of ``host`` (and their work horses)."""
        for proc in self.hosts.pop(host):
            kill9(proc)

    def host_of(self, pid: int) -> str | None:
        """The host whose worker process has ``pid``."""
        return next((h for h, ps in self.hosts.items() if any(p.pid == pid for p in ps)), None)

    def stop(self) -> None:
        """Stop every worker left."""
        for procs in self.hosts.values():
            for proc in procs:
                stop(proc)


@pytest.fixture
def cluster(
    tmp_path: Path,
    redis_url: str,
    chroma_server: str,
    postgres: Postgres,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Cluster]:
    """Settings shared by every process (Redis, Chroma, a fresh PostgreSQL database), this test
    process on the same database and Chroma server, running jobs in-process (no REDIS_URL
    here)."""
    Redis.from_url(redis_url).flushdb()
    settings = {
        "REDIS_URL": redis_url,
        "CODERAG_CHROMA_URL": chroma_server,
        "CODERAG_DATABASE_URL": postgres.create(),
        "CODERAG_URL_SCHEMES": "http",
        "CODERAG_EMBED_MODEL_2": "",
        "CODERAG_JOB_LEASE_S": LEASE_S,
        "CODERAG_PARSE_WORKERS": "1",
        "OMP_NUM_THREADS": "1",
    }
    for key, value in settings.items():
        if key != "REDIS_URL":
            monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    reset_stores()
    out = Cluster(tmp_path, settings)
    yield out
    out.stop()
    reset_stores()  # the engine's connections go before the database does


def reference(name: str, url: str) -> None:
    """The all-in-one index of ``url``: every stage on this thread, in this process."""
    get_catalog().create_repo(name, None, url, None)
    run_now(IndexRepo(repo=name))
    assert get_catalog().get_repo(name).complete


def assert_same_index(client: httpx.Client, name: str, ref: str) -> None:
    """The repository's index equals the reference's: units, symbols, calls, imports, files,
    one current vector per unit in every space, and the same /search results."""
    assert snapshot(name) == snapshot(ref)
    for space in ("vector",):
        assert get_vectors().hashes(name, space) == get_catalog().unit_hashes(name), space
        assert get_vectors().count(name, space) == get_vectors().count(ref, space) > 600
    for query in QUERIES:
        got = [
            [(h["file"], h["start_line"], h["end_line"], h["symbol"]) for h in r["results"]]
            for r in (
                client.post("/search", json={"query": query, "repo": repo, "top_k": 8}).json()
                for repo in (name, ref)
            )
        ]
        assert got[0] == got[1] and got[0], query


@contextmanager
def api_host(cluster: Cluster, tmp: Path) -> Iterator[httpx.Client]:
    """The API server on a host of its own, on the cluster's services; a client of it."""
    env = host_dirs(tmp / "api") | cluster.settings
    with live_server(tmp / "api" / "data", **env) as base:
        yield httpx.Client(base_url=base, timeout=120)


def index_like(client: httpx.Client, name: str, remote: str, ref: str) -> None:
    """Register ``remote`` as ``name``, wait until its index completes and check that it equals
    the reference index ``ref``, at the same commit."""
    r = client.post("/repos", json={"name": name, "url": remote})
    assert r.status_code == 202, r.text
    assert wait_complete(client, name)["status"] == "ready"
    assert_same_index(client, name, ref)
    assert get_catalog().get_repo(name).commit == get_catalog().get_repo(ref).commit


def clones(root: Path, name: str) -> list[str]:
    """The hosts under ``root`` holding a parser clone of ``name``."""
    return sorted(p.name for p in root.iterdir() if (p / "data/repos" / name / ".git").is_dir())


@pytest.mark.slow
def test_two_worker_hosts_index_a_url_repository_as_one_process_does(
    cluster: Cluster, remote: str, tmp_path: Path
) -> None:
    reference("ref1", remote)
    cluster.start_host("api-host", ("retriever",))
    cluster.start_host("host-a")
    cluster.start_host("host-b")
    with api_host(cluster, tmp_path) as client:
        index_like(client, "hosts", remote, "ref1")
        # the API host never parsed: it clones into its readers' folder for the file view.
        # Both worker hosts may hold a clone: with a 10 s lease, a loaded CI machine can
        # start the chain again on the other host, which is what the lease is for
        assert clones(tmp_path, "hosts") in (["host-a"], ["host-b"], ["host-a", "host-b"])
        page = client.get("/repos/hosts/file", params={"path": "svc/stage_007.py", "end": 2})
        assert page.status_code == 200, page.text
        assert page.json()["lines"][0] == "def step_7_0(order, ledger):"
        assert (tmp_path / "api" / "data" / TREES_DIR / "hosts" / ".git").is_dir()
    assert not list(tmp_path.glob("*/data/coderag.db")), "every process on PostgreSQL"


@pytest.mark.slow
def test_a_host_killed_mid_index_loses_nothing(
    cluster: Cluster, remote: str, tmp_path: Path, redis_url: str
) -> None:
    reference("ref2", remote)
    cluster.start_host("api-host", ("retriever",))
    cluster.start_host("host-a")
    cluster.start_host("host-b")
    with api_host(cluster, tmp_path) as client:
        assert client.post("/repos", json={"name": "killed", "url": remote}).status_code == 202

        def kill(worker: Worker) -> str:
            host = cluster.host_of(worker.pid)
            assert host in ("host-a", "host-b"), worker.pid
            cluster.kill_host(host)
            return host

        victim = kill_mid_embedding(client, Redis.from_url(redis_url), "killed", kill)
        assert_same_index(client, "killed", "ref2")
        survivor = "host-b" if victim == "host-a" else "host-a"
        assert survivor in clones(tmp_path, "killed")


def kill_mid_embedding(
    client: httpx.Client, conn: Redis, name: str, kill: Callable[[Worker], str]
) -> str:
    """Wait until a worker embeds, ``kill`` it (which says the host it was on) while ``name``'s
    vectors are not all written, and wait until the index completes all the same; the host."""
    embedding = StartedJobRegistry(queue=Queue("embedder", connection=conn))
    deadline = time.monotonic() + 300
    # the registry lists a job a moment before its worker names it as its current job
    while not (worker := _embedding_worker(embedding, conn)):
        assert time.monotonic() < deadline, client.get(f"/repos/{name}").json()
        time.sleep(0.05)
    host = kill(worker)
    assert not get_catalog().get_repo(name).complete
    assert wait_complete(client, name)["status"] == "ready"
    return host


def _embedding_worker(embedding: StartedJobRegistry, conn: Redis) -> Worker | None:
    """The worker running an embedder job now, if any."""
    running = embedding.get_job_ids()
    if not running:
        return None
    return next((w for w in Worker.all(connection=conn) if w.get_current_job_id() in running), None)


def _remote_with_history(tmp: Path) -> tuple[Path, git.Repo]:
    work = tmp / "work"
    (work / "app").mkdir(parents=True)
    (work / "app" / "ledger.py").write_text("def post(order):\n    return order.amount\n")
    bare = tmp / "remote.git"
    return bare, published(work, bare, "ledger")


def _file_remote(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, git.Repo, Path]:
    """A remote with history that the app may clone (``file://`` allowed); (the bare
    repository, the work tree that pushes to it, the app's data directory)."""
    bare, work = _remote_with_history(tmp)
    monkeypatch.setenv("CODERAG_URL_SCHEMES", "file")
    get_settings.cache_clear()
    return bare, work, Path(os.environ["CODERAG_DATA_DIR"])


def test_an_api_host_without_a_clone_reads_lines_and_history_at_the_indexed_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare, work, data = _file_remote(tmp_path, monkeypatch)
    with TestClient(create_app()) as client:
        r = client.post("/repos", json={"name": "remote", "url": bare.as_uri()})
        assert r.status_code == 202, r.text
        assert wait_ready(client, "remote")["status"] == "ready"
        indexed = get_catalog().get_repo("remote").commit
        # the parser's clone was on another host; the remote has moved on since the index
        shutil.rmtree(data / gitsync.CLONES_DIR / "remote")
        (Path(work.working_dir) / "app" / "ledger.py").write_text("def post(order):\n    pass\n")
        commit_all(work, "pass")
        work.git.push("origin", "main")
        page = client.get("/repos/remote/file", params={"path": "app/ledger.py"})
        assert page.status_code == 200, page.text
        assert page.json()["lines"] == ["def post(order):", "    return order.amount"]
        tree = data / TREES_DIR / "remote"
        assert git.Repo(tree).head.commit.hexsha == indexed
        history = client.post(
            "/repos/remote/history",
            json={"ranges": [{"file": "app/ledger.py", "start_line": 1, "end_line": 2}]},
        ).json()
        assert history["has_history"] and indexed.startswith(history["ranges"][0]["last"]["commit"])
        health = client.get("/repos/remote/health").json()
        assert health["up_to_date"] and health["head_commit"] == indexed
        assert not (data / gitsync.CLONES_DIR / "remote").exists(), "readers leave it alone"


def test_a_parser_clone_left_by_another_origin_is_cloned_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = _remote_with_history(tmp_path / "one")
    other = tmp_path / "two"
    (other / "pkg").mkdir(parents=True)
    (other / "pkg" / "main.go").write_text("package main\n\nfunc main() {}\n")
    published(other, tmp_path / "two.git", "go")
    monkeypatch.setenv("CODERAG_URL_SCHEMES", "file")
    get_settings.cache_clear()
    data = Path(os.environ["CODERAG_DATA_DIR"])
    stale = gitsync.checkout(Repo(name="r", status="queued", url=first.as_uri()), data)
    assert (stale / "app" / "ledger.py").is_file()
    # the name was deleted on the API host and registered again with another URL
    fresh = gitsync.checkout(Repo(name="r", status="queued", url=other.as_uri()), data)
    assert fresh == stale and (fresh / "pkg" / "main.go").is_file()
    assert not (fresh / "app").exists()


def test_a_parse_removes_this_hosts_clones_of_names_deleted_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare, _, data = _file_remote(tmp_path, monkeypatch)
    clones_dir = data / gitsync.CLONES_DIR
    with TestClient(create_app()) as client:
        for name in ("kept", "gone"):
            r = client.post("/repos", json={"name": name, "url": bare.as_uri()})
            assert r.status_code == 202, r.text
            assert wait_ready(client, name)["status"] == "ready"
        saved = tmp_path / "saved"
        shutil.copytree(clones_dir / "gone", saved)
        assert client.delete("/repos/gone").status_code == 204
        # a parser worker on another host still holds its clone of the deleted name
        shutil.copytree(saved, clones_dir / "gone")
        assert client.post("/repos/kept/reindex").status_code == 202
        assert wait_ready(client, "kept")["status"] == "ready"
        assert sorted(p.name for p in clones_dir.iterdir()) == ["kept"]
