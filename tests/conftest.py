"""Shared fixtures: an isolated data directory per test, real git repositories in temp folders,
and a real redis-server and PostgreSQL server on free ports."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import git
import pytest
from fastapi.testclient import TestClient

from coderag import embedding, queue
from coderag.jobs import IndexRepo, Parsed
from coderag.settings import get_settings
from coderag.store import Database, reset_stores
from coderag_app.server import load_jobs
from coderag_embedder.queries import local
from harness.postgres import Postgres, binaries

# the tests are a composition root too: a retriever called directly embeds in-process
embedding.use_local(local())

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLE_LANGUAGES = ("python", "go", "java", "javascript", "typescript", "rust", "c")
"""The fixtures the sample repository is made of, one per language."""

load_jobs()  # the test process runs every service's jobs: in-process and as rq SimpleWorkers


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own SQLite file and embedded Chroma."""
    data = tmp_path / "data"
    monkeypatch.setenv("CODERAG_DATA_DIR", str(data))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # servers announced there
    for var in (
        "REDIS_URL",
        "CODERAG_REDIS_URL",
        "CODERAG_API_TOKENS",
        "CODERAG_LLM_BACKEND",
        "CODERAG_EMBEDDER_URL",
        "CODERAG_DATABASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    # TestClient's Host is "testserver"; repositories live in pytest's temp folders
    monkeypatch.setenv("CODERAG_ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
    monkeypatch.setenv("CODERAG_REPO_ROOTS", str(tmp_path.parent))
    get_settings.cache_clear()
    reset_stores()
    yield data
    queue.drain()
    reset_stores()
    get_settings.cache_clear()


def wait_ready(client: TestClient, name: str, timeout: float = 120) -> dict:
    """Poll a repository over HTTP, draining the in-process queue, until complete or failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queue.drain()
        body = client.get(f"/repos/{name}").json()
        if body["status"] == "error" or (body["status"] == "ready" and body["complete"]):
            return body
        time.sleep(0.1)
    raise AssertionError(f"{name} not ready: {body}")


def commit_all(repo: git.Repo, message: str) -> str:
    """Stage everything and commit; returns the sha."""
    repo.git.add(A=True)
    repo.index.commit(message, author=git.Actor("Ada", "ada@example.com"))
    return repo.head.commit.hexsha


def parse(name: str) -> Parsed:
    """Index a repository on this thread, its whole chain inline; what its parse found."""
    out = queue.run_now(IndexRepo(repo=name))
    assert isinstance(out, Parsed), out
    return out


@contextmanager
def indexed(root: Path, name: str, sources: dict[str, str]) -> Iterator[TestClient]:
    """The all-in-one app with one git repository of ``sources`` under ``root`` registered and
    completely indexed."""
    from coderag_app.server import create_app

    for rel, text in sources.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    commit_all(git.Repo.init(root), name)
    with TestClient(create_app()) as client:
        assert client.post("/repos", json={"name": name, "path": str(root)}).status_code < 300
        assert wait_ready(client, name)["status"] == "ready"
        yield client


def copy_fixtures(root: Path) -> None:
    """Copy the seven language fixtures' sources to ``root/src/<language>/`` (the idiom
    fixtures of tests/test_js_idioms.py stay out: the sample repository's answers stay put)."""
    for lang_dir in (FIXTURES / name for name in SAMPLE_LANGUAGES):
        for src in lang_dir.iterdir():
            if src.name != "expected.json":
                dest = root / "src" / lang_dir.name / src.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(src, dest)


@pytest.fixture
def sample_repo(tmp_path: Path) -> Path:
    """A git repository holding the five language fixtures plus ignored and binary files."""
    root = tmp_path / "sample"
    root.mkdir()
    copy_fixtures(root)
    (root / ".gitignore").write_text("secret/\n*.log\n")
    (root / "secret").mkdir()
    (root / "secret" / "keys.py").write_text("API_KEY = 'x'\n")
    (root / "debug.log").write_text("noise\n")
    (root / "node_modules" / "lib").mkdir(parents=True)
    (root / "node_modules" / "lib" / "index.js").write_text("function vendored() {}\n")
    (root / "image.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (root / "latin1.py").write_bytes("caf\xe9 = 1\n".encode("latin-1"))
    (root / "README.md").write_text("# Sample\n\nAn order service used by the tests.\n")
    repo = git.Repo.init(root)
    commit_all(repo, "initial")
    return root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real redis-server on a free loopback port for the session."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(
            "redis-server is not installed (make test installs it: apt-get install redis-server)"
        )
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    from redis import Redis

    for _ in range(100):
        try:
            Redis.from_url(url).ping()
            break
        except Exception:
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A real PostgreSQL server (the Debian package's) on a free loopback port for the session;
    ``postgres.create()`` makes a fresh database and returns its URL."""
    bin_dir = binaries()
    if bin_dir is None:
        pytest.fail(
            "PostgreSQL is not installed (make test installs it: apt-get install postgresql)"
        )
    server = Postgres(bin_dir, _free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_target(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A new database of each backend in turn: a SQLite file, then a fresh PostgreSQL database
    on the session's server."""
    if request.param == "sqlite":
        return tmp_path / "store.db"
    return request.getfixturevalue("postgres").create()


@pytest.fixture
def db(database_target: Path | str) -> Iterator[Database]:
    """The store's database on each backend (schema migrated), closed after the test."""
    database = Database(database_target)
    yield database
    database.close()


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `chroma run` server on a free loopback port."""
    from harness.procs import start_chroma

    try:
        proc, url = start_chroma(tmp_path_factory.mktemp("chroma-server"))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield url
    proc.terminate()
    proc.wait(10)
