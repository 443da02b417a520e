"""The compose suite, for real: the images of deploy/Dockerfile brought up with docker-compose on
the host network (deploy/compose.test.yml, each container on its own loopback port), and every
request sent through the gateway alone. `make compose-test` builds the images and runs this;
without CODERAG_COMPOSE_TAG (the images' tag) it is skipped."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import git
import httpx
import pytest
from redis import Redis
from rq import Queue

from tests.conftest import FIXTURES, SAMPLE_LANGUAGES, commit_all
from tests.liveserver import wait_complete

ROOT = Path(__file__).resolve().parent.parent
TAG = os.environ.get("CODERAG_COMPOSE_TAG", "")
COMPOSE = os.environ.get("CODERAG_COMPOSE", "docker-compose").split()
SECRET = "compose-test-secret"
PORTS = ("REDIS", "CHROMA", "PARSER", "EMBEDDER", "RETRIEVER", "GENERATOR", "GATEWAY", "DB")
FILES = {
    "sqlite": ("docker-compose.yml", "deploy/compose.test.yml"),
    "postgresql": (
        "docker-compose.yml",
        "deploy/compose.test.yml",
        "deploy/compose.postgres.yml",
        "deploy/compose.postgres-test.yml",
    ),
}
"""The compose files of each database the suite runs on (the shared SQLite volume, or the
PostgreSQL container)."""
UP_TIMEOUT_S = 600
INDEX_TIMEOUT_S = 900
RECOVERY_TIMEOUT_S = 900

pytestmark = [
    pytest.mark.compose,
    pytest.mark.skipif(not TAG, reason="needs the images: run `make compose-test`"),
]


@dataclass
class Suite:
    """A running suite: the gateway's URL, the project's environment, the repositories folder."""

    base: str
    env: dict[str, str]
    repos: Path
    redis_url: str
    database: str

    def compose(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run docker-compose on this project."""
        cmd = [*COMPOSE, *(a for f in FILES[self.database] for a in ("-f", f)), *args]
        return subprocess.run(
            cmd, cwd=ROOT, env=self.env, check=check, capture_output=True, text=True
        )

    def wait_repo(self, client: httpx.Client, name: str, timeout: float = INDEX_TIMEOUT_S) -> dict:
        """Poll /repos/NAME through the gateway until it is ready (or failed)."""
        return wait_complete(client, name, timeout)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _logs(suite: Suite) -> str:
    return suite.compose("logs", "--no-color", "--tail", "40", check=False).stdout[-20000:]


@pytest.fixture(scope="module", params=list(FILES))
def suite(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Suite]:
    """The whole suite up on each database, healthy through the gateway; torn down with its
    volumes after."""
    repos = tmp_path_factory.mktemp("repos")
    ports = dict(zip(PORTS, _free_ports(len(PORTS)), strict=True))
    env = {
        **os.environ,
        "COMPOSE_PROJECT_NAME": f"coderagtest{uuid.uuid4().hex[:8]}",
        "CODERAG_TAG": TAG,
        "REPOS_DIR": str(repos),
        "CODERAG_WEBHOOK_SECRET": SECRET,
        "CODERAG_DB_PASSWORD": "compose-test-db",
        "CODERAG_REDIS_PASSWORD": "composetestredis",
        "CODERAG_DB_HOST": "127.0.0.1",
        "CODERAG_DB_PORT": str(ports["DB"]),
        **{f"CR_{k}_PORT": str(v) for k, v in ports.items()},
    }
    s = Suite(
        f"http://127.0.0.1:{ports['GATEWAY']}",
        env,
        repos,
        f"redis://:composetestredis@127.0.0.1:{ports['REDIS']}/0",
        request.param,
    )
    s.compose("up", "-d", "--no-build")
    try:
        deadline = time.monotonic() + UP_TIMEOUT_S
        health: dict = {}
        while time.monotonic() < deadline:
            try:
                health = httpx.get(s.base + "/health", timeout=10).json()
                if health.get("status") == "ok":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(2)
        else:
            pytest.fail(f"suite not healthy: {health}\n{_logs(s)}")
        yield s
    finally:
        s.compose("down", "-v", "--remove-orphans", check=False)


def _write_repo(root: Path, files: dict[str, str], origin: str) -> git.Repo:
    root.mkdir(parents=True)
    repo = git.Repo.init(root, initial_branch="main")
    repo.create_remote("origin", origin)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    commit_all(repo, "initial")
    return repo


def _signed_push(client: httpx.Client, origin: str, sha: str) -> httpx.Response:
    body = json.dumps(
        {"ref": "refs/heads/main", "after": sha, "repository": {"clone_url": origin}}
    ).encode()
    sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-Hub-Signature-256": sig,
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "Content-Type": "application/json",
    }
    return client.post("/webhooks/github", content=body, headers=headers)


def test_gateway_health_shows_every_service_and_its_dependencies(suite: Suite) -> None:
    body = httpx.get(suite.base + "/health", timeout=10).json()
    assert set(body["services"]) == {"parser", "embedder", "retriever", "generator"}
    for name, service in body["services"].items():
        deps = service["dependencies"]
        assert deps[suite.database] == deps["chroma"] == deps["redis"] == "ok", (name, deps)
    r = httpx.get(suite.base + "/nowhere", timeout=10)
    assert r.status_code == 404 and "/repos" in r.json()["detail"]


def test_register_search_ask_push_and_audit_through_the_gateway(suite: Suite) -> None:
    origin = "https://github.com/acme/alpha.git"
    sources = {
        f"src/{src.parent.name}/{src.name}": src.read_text(encoding="utf-8")
        for name in SAMPLE_LANGUAGES
        for src in sorted((FIXTURES / name).iterdir())
        if src.name != "expected.json"
    }
    repo = _write_repo(suite.repos / "alpha", sources, origin)
    client = httpx.Client(base_url=suite.base, timeout=120)
    r = client.post("/repos", json={"name": "alpha", "path": str(suite.repos / "alpha")})
    assert r.status_code == 202, r.text
    ready = suite.wait_repo(client, "alpha")
    assert ready["status"] == "ready" and ready["units"] > 0, ready
    assert ready["commit"] == repo.head.commit.hexsha

    hits = client.post("/search", json={"query": "order service create", "repo": "alpha"})
    assert hits.status_code == 200 and hits.json()["results"], hits.text
    assert any("OrderService" in h["symbol"] for h in hits.json()["results"][:3]), hits.text

    answer = client.post("/ask", json={"query": "how is an order created?", "repo": "alpha"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["citations"], answer.json()

    (suite.repos / "alpha" / "billing.py").write_text(
        "def refund_invoice(invoice_id: str) -> bool:\n"
        '    """Refund a paid invoice and tell the ledger."""\n'
        "    return ledger_post('refund', invoice_id)\n",
        encoding="utf-8",
    )
    sha = commit_all(repo, "add refunds")
    pushed = _signed_push(client, origin, sha)
    assert pushed.status_code == 202 and pushed.json()["status"] == "queued", pushed.text
    deadline = time.monotonic() + INDEX_TIMEOUT_S
    while client.get("/repos/alpha").json()["commit"] != sha:
        assert time.monotonic() < deadline, "the push was not indexed"
        time.sleep(0.5)
    after = suite.wait_repo(client, "alpha")
    assert after["files"] == ready["files"] + 1, after
    # incremental: the parser job of the push parsed the one new file, not the tree
    jobs = Queue("parser", connection=Redis.from_url(suite.redis_url)).finished_job_registry
    results = [j.return_value() for j in _jobs(jobs)]
    push_job = next(r for r in results if r and r.get("commit") == sha)
    assert push_job["files"] == ["billing.py"] and not push_job["full_walk"], push_job
    found = client.post("/search", json={"query": "refund invoice", "repo": "alpha"}).json()
    assert found["results"][0]["symbol"] == "refund_invoice", found

    csv = client.get("/audit/export.csv", params={"since": "2020-01-01T00:00:00Z"})
    assert csv.status_code == 200 and csv.text.startswith("id,ts,user,endpoint")
    rows = csv.text.splitlines()[1:]
    assert any(",search,alpha," in r for r in rows) and any(",ask,alpha," in r for r in rows), (
        csv.text
    )


def _jobs(registry: object) -> list:
    from rq.job import Job

    return Job.fetch_many(registry.get_job_ids(), connection=registry.connection)


def _synthetic_repo(count: int) -> dict[str, str]:
    """Distinct small modules, so embedding them takes long enough to interrupt."""
    files = {}
    for i in range(count):
        files[f"pkg/mod_{i:03d}.py"] = "".join(
            f"def handler_{i}_{j}(payload: dict) -> dict:\n"
            f'    """Handle event {i}.{j}: validate the {["order", "refund", "user"][j % 3]}."""\n'
            f"    value = payload.get('field_{j}', {i * j})\n"
            f"    return {{'handled': value, 'stage': {j}}}\n\n"
            for j in range(4)
        )
    return files


def _ranked(client: httpx.Client, repo: str) -> list[tuple]:
    out = []
    for query in ("validate the refund", "handle event order", "payload field stage"):
        body = client.post("/search", json={"query": query, "repo": repo, "top_k": 10}).json()
        out.append(
            [
                (h["file"], h["start_line"], h["end_line"], h["symbol"], round(h["score"], 4))
                for h in body["results"]
            ]
        )
    return out


def test_killed_embedder_worker_mid_index_still_ends_ready_and_complete(suite: Suite) -> None:
    files = _synthetic_repo(60)
    for name in ("beta", "gamma"):
        _write_repo(suite.repos / name, files, f"https://github.com/acme/{name}.git")
    client = httpx.Client(base_url=suite.base, timeout=120)
    client.post("/repos", json={"name": "beta", "path": str(suite.repos / "beta")})
    deadline = time.monotonic() + INDEX_TIMEOUT_S
    while True:
        progress = client.get("/repos/beta").json().get("progress") or ""
        if progress.startswith("embedding"):
            done, total = map(int, progress.rsplit(" ", 1)[1].split("/"))
            if 0 < done < total:
                break
        assert time.monotonic() < deadline, "beta never started embedding"
        time.sleep(0.2)
    worker = suite.compose("ps", "-q", "embedder-worker").stdout.split()
    subprocess.run(["docker", "kill", *worker], check=True, capture_output=True)
    suite.compose("start", "embedder-worker")
    beta = suite.wait_repo(client, "beta", RECOVERY_TIMEOUT_S)
    assert beta["status"] == "ready", beta
    client.post("/repos", json={"name": "gamma", "path": str(suite.repos / "gamma")})
    gamma = suite.wait_repo(client, "gamma")
    assert (beta["files"], beta["units"]) == (gamma["files"], gamma["units"])
    assert _ranked(client, "beta") == _ranked(client, "gamma")


def test_docker_is_usable() -> None:
    """The engine answers (else the fixture's failure would read as a product bug)."""
    assert shutil.which("docker"), "no docker client on PATH"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True)
    assert info.returncode == 0, info.stderr
