"""Two worker hosts as containers: each is a compose project of deploy/compose.worker-host.yml (a
parser worker and an embedder worker from the images, each container with a volume of its own),
sharing nothing with the other or with the API but Redis, PostgreSQL, the Chroma server and the
git remote, all on loopback ports (the containers use the host's network). They index a
repository registered by URL to the all-in-one index's result, and killing the container that is
embedding loses nothing. `make compose-test` builds the images and runs this; without
CODERAG_COMPOSE_TAG (the images' tag) it is skipped."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis
from rq import Worker

from tests.test_worker_hosts import (  # noqa: F401 (cluster and remote are fixtures)
    Cluster,
    api_host,
    assert_same_index,
    cluster,
    index_like,
    kill_mid_embedding,
    reference,
    remote,
)

ROOT = Path(__file__).resolve().parent.parent
TAG = os.environ.get("CODERAG_COMPOSE_TAG", "")
COMPOSE = os.environ.get("CODERAG_COMPOSE", "docker-compose").split()
HOST_FILE = ROOT / "deploy" / "compose.worker-host.yml"
SERVICES = ("parser-worker", "embedder-worker")

pytestmark = [
    pytest.mark.compose,
    pytest.mark.skipif(not TAG, reason="needs the images: run `make compose-test`"),
]


class Hosts:
    """Worker hosts, one compose project each, brought down with their volumes at the end."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.settings = settings
        self.run = uuid.uuid4().hex[:8]
        self.up: list[str] = []

    def compose(
        self, host: str, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """docker-compose on ``host``'s project."""
        env = {
            **os.environ,
            **self.settings,
            "CODERAG_TAG": TAG,
            "CODERAG_WORKER_HOST": host,
            "COMPOSE_PROJECT_NAME": f"crhost{self.run}{host.replace('-', '')}",
        }
        cmd = [*COMPOSE, "-f", str(HOST_FILE), *args]
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=check)

    def start(self, host: str) -> None:
        """Bring ``host``'s workers up and wait until Redis lists both."""
        self.up.append(host)
        self.compose(host, "up", "-d", "--no-build")
        names = {f"{host}-{s.split('-')[0]}" for s in SERVICES}
        conn = Redis.from_url(self.settings["REDIS_URL"])
        deadline = time.monotonic() + 300
        while not names <= {w.name for w in _workers(conn)}:
            assert time.monotonic() < deadline, self.logs(host)
            time.sleep(1)

    def container(self, host: str, service: str) -> str:
        """The container id of ``service`` on ``host``."""
        return self.compose(host, "ps", "-q", service).stdout.strip()

    def logs(self, host: str) -> str:
        """The last lines of ``host``'s containers' logs."""
        return self.compose(host, "logs", "--no-color", "--tail", "40").stdout[-8000:]

    def clones(self, host: str) -> list[str]:
        """The repositories ``host``'s parser container has cloned."""
        ctr = self.container(host, "parser-worker")
        out = subprocess.run(
            ["docker", "exec", ctr, "sh", "-c", "ls /data/repos 2>/dev/null || true"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.split()

    def down(self) -> None:
        """Remove every host's containers and volumes."""
        for host in self.up:
            self.compose(host, "down", "-v", "--remove-orphans", check=False)


def _workers(conn: Redis) -> list[Worker]:
    return Worker.all(connection=conn)


@pytest.fixture
def hosts(cluster: Cluster) -> Iterator[Hosts]:  # noqa: F811
    """Container hosts on the cluster's services; the API's retriever worker is a process."""
    out = Hosts(cluster.settings)
    try:
        yield out
    finally:
        out.down()


def start(api: Cluster, hosts: Hosts) -> None:
    """The API host's retriever worker (a process) and the two container hosts."""
    api.start_host("api-host", ("retriever",))
    for host in ("host-a", "host-b"):
        hosts.start(host)


def mounts(container: str) -> list[dict]:
    """What ``docker inspect`` says is mounted in ``container``."""
    out = subprocess.run(
        ["docker", "inspect", "--format", "{{json .Mounts}}", container],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def test_two_container_hosts_sharing_no_volume_index_as_one_process_does(
    cluster: Cluster,  # noqa: F811
    hosts: Hosts,
    remote: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    reference("ref1", remote)
    start(cluster, hosts)
    ctrs = [hosts.container(h, s) for h in ("host-a", "host-b") for s in SERVICES]
    seen = [m for c in ctrs for m in mounts(c)]
    assert [m["Type"] for m in seen] == ["volume"] * 4, seen
    assert len({m["Name"] for m in seen}) == 4, "no volume is shared"
    with api_host(cluster, tmp_path) as client:
        index_like(client, "hosts", remote, "ref1")
        cloned = {h: hosts.clones(h) for h in ("host-a", "host-b")}
        assert sorted(cloned.values()) == [[], ["hosts"]], cloned


def test_killing_the_embedding_container_mid_index_loses_nothing(
    cluster: Cluster,  # noqa: F811
    hosts: Hosts,
    remote: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    reference("ref2", remote)
    start(cluster, hosts)
    with api_host(cluster, tmp_path) as client:
        assert client.post("/repos", json={"name": "killed", "url": remote}).status_code == 202

        def kill(worker: Worker) -> str:
            host = worker.name.removesuffix("-embedder")
            assert host in ("host-a", "host-b"), worker.name
            ctr = hosts.container(host, "embedder-worker")
            subprocess.run(["docker", "kill", ctr], check=True, capture_output=True)
            return host

        kill_mid_embedding(client, Redis.from_url(cluster.settings["REDIS_URL"]), "killed", kill)
        assert_same_index(client, "killed", "ref2")
