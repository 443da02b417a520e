"""Fault bench: real processes killed at random points, and a load of concurrent clients.

1. ``kill -9`` of an rq worker (its whole process group) at random points of an index, then a
   new worker: does the repository end equal to a full index (units, files, symbols, calls,
   imports, one vector per unit carrying its unit's hash)?
2. ``kill -9`` of the all-in-one server mid-index, then a restart: the same question.
3. A Redis restart (append-only file on) with index jobs queued and no worker: all still there?
4. ``--clients`` concurrent clients on /search and /ask for ``--seconds`` while another
   repository indexes: errors, p50/p95 latency.

    nice python bench/faults.py --kills 10 --clients 50 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(tempfile.mkdtemp(prefix="coderag-faults-"))
os.environ.update(
    CODERAG_DATA_DIR=str(WORK / "data"),
    CODERAG_EMBED_MODEL_2="",
    CODERAG_JOB_LEASE_S="5",
    PYTHONPATH=os.pathsep.join(
        [str(ROOT / "shared"), *(str(p) for p in sorted((ROOT / "services").iterdir())), str(ROOT)]
    ),
)
sys.path[:0] = os.environ["PYTHONPATH"].split(os.pathsep)

from coderag.settings import get_settings  # noqa: E402
from coderag.store import get_catalog, get_vectors  # noqa: E402
from tests.procs import RedisServer, free_port, kill9, start_worker, stop, worker_env  # noqa: E402
from tests.test_incremental import snapshot  # noqa: E402
from tests.test_recovery import make_repo  # noqa: E402


def settled(name: str, timeout: float = 900) -> str:
    """Wait until a repository is ready or failed; its status."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = get_catalog().get_repo(name).status
        except Exception:
            status = "missing"
        if status in ("ready", "error"):
            return status
        time.sleep(0.3)
    return "stuck"


def equal(name: str, reference: dict) -> bool:
    """Whether a repository's index equals the reference full index, vectors included."""
    try:
        same = snapshot(name) == reference
    except AssertionError:  # a unit without its vector
        return False
    return same and get_vectors().hashes(name) == get_catalog().unit_hashes(name)


def register(name: str, root: Path) -> None:
    """Register a repository in the catalog (its job queued by the caller's path)."""
    get_catalog().create_repo(name, str(root), None, None)


def enqueue_index(name: str) -> None:
    """Queue a repository's index on Redis, as POST /repos does."""
    from coderag.jobs import IndexRepo
    from coderag.queue import enqueue

    enqueue(IndexRepo(repo=name))


def worker_kills(kills: int, root: Path, log: Path) -> tuple[int, int, float]:
    """(equal, trials, seconds of a full index) for workers killed at random points."""
    worker = start_worker(worker_env(), log)
    start = time.monotonic()
    register("ref", root)
    enqueue_index("ref")
    assert settled("ref") == "ready", "the reference index failed"
    full_s = time.monotonic() - start
    reference = snapshot("ref")
    ok = 0
    rng = random.Random(12)
    for i in range(kills):
        name = f"kill{i}"
        register(name, root)
        enqueue_index(name)
        time.sleep(rng.uniform(0.5, full_s))
        kill9(worker)
        worker = start_worker(worker_env(), log)
        same = settled(name) == "ready" and equal(name, reference)
        ok += same
        print(f"  worker kill {i + 1}/{kills}: {'equal' if same else 'DIFFERENT'}", flush=True)
    stop(worker)
    return ok, kills, full_s


def server_kill(root: Path, reference: dict, full_s: float, log: Path) -> bool:
    """Kill the all-in-one server (in-process jobs) mid-index, restart it: equal at the end?"""
    port = free_port()
    env = worker_env(CODERAG_REDIS_URL="", REDIS_URL="")
    env.pop("REDIS_URL")
    env.pop("CODERAG_REDIS_URL")
    code = "import sys; from coderag.cli import main; sys.exit(main(sys.argv[1:]))"
    cmd = [sys.executable, "-c", code, "serve", "--port", str(port)]

    def serve() -> subprocess.Popen:
        with log.open("ab") as out:
            return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # fmt: skip

    register("server", root)  # queued: the server's start-up heal picks it up
    server = serve()
    deadline = time.monotonic() + 600
    while get_catalog().get_repo("server").status != "indexing" and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(random.Random(7).uniform(0.5, full_s / 2))
    kill9(server)
    server = serve()
    same = settled("server") == "ready" and equal("server", reference)
    stop(server)
    return same


def redis_restart(redis: RedisServer, root: Path, reference: dict, log: Path) -> tuple[int, int]:
    """Queue three indexes with no worker, restart Redis, then run a worker: how many end equal."""
    names = [f"queued{i}" for i in range(3)]
    for name in names:
        register(name, root)
        enqueue_index(name)
    redis.stop()
    redis.start()
    worker = start_worker(worker_env(), log)
    ok = sum(settled(n) == "ready" and equal(n, reference) for n in names)
    stop(worker)
    return ok, len(names)


async def load(port: int, clients: int, seconds: float) -> dict[str, list[float] | int]:
    """``clients`` loops of /search then /ask for ``seconds``; latencies (ms) and errors."""
    import httpx

    lat: dict[str, list[float]] = {"search": [], "ask": []}
    errors = {"search": 0, "ask": 0}
    stop_at = time.monotonic() + seconds
    questions = ["how is a step posted to the ledger", "where is the order total computed"]

    async def client(i: int) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as c:
            while time.monotonic() < stop_at:
                for kind in ("search", "ask"):
                    body = {"query": questions[i % 2], "repo": "served"}
                    t = time.perf_counter()
                    try:
                        r = await c.post(f"/{kind}", json=body)
                        ok = r.status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    lat[kind].append((time.perf_counter() - t) * 1000)
                    errors[kind] += not ok

    await asyncio.gather(*(client(i) for i in range(clients)))
    return {**lat, **{f"{k}_errors": v for k, v in errors.items()}}


def concurrency(root: Path, clients: int, seconds: float, log: Path) -> dict:
    """Load on a served repository while a second one indexes (API + a worker on Redis)."""
    import numpy as np

    port = free_port()
    code = "import sys; from coderag.cli import main; sys.exit(main(sys.argv[1:]))"
    with log.open("ab") as out:
        server = subprocess.Popen(
            [sys.executable, "-c", code, "serve", "--port", str(port)],
            env=worker_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    worker = start_worker(worker_env(), log)
    register("served", root)
    enqueue_index("served")
    settled("served")
    other = make_repo(WORK / "other", modules=40)
    register("indexing", other)
    enqueue_index("indexing")
    time.sleep(10)  # the server is up and the second index under way
    out = asyncio.run(load(port, clients, seconds))
    busy = get_catalog().get_repo("indexing").status
    stop(server)
    stop(worker)

    def pct(xs: list[float], q: float) -> float:
        return float(np.percentile(xs, q)) if xs else float("nan")

    return {
        kind: (len(out[kind]), out[f"{kind}_errors"], pct(out[kind], 50), pct(out[kind], 95))
        for kind in ("search", "ask")
    } | {"second_repo_during_load": busy}


def main() -> None:
    """Run every fault and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--modules", type=int, default=6, help="size of the indexed repository")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60)
    args = ap.parse_args()
    redis = RedisServer(WORK / "redis").start()
    os.environ["REDIS_URL"] = redis.url
    get_settings.cache_clear()
    log = WORK / "processes.log"
    root = make_repo(WORK / "repo", modules=args.modules)
    try:
        ok, trials, full_s = worker_kills(args.kills, root, log)
        print(f"worker kill -9 at random points: {ok}/{trials} equal to a full index "
              f"(a full index took {full_s:.0f} s)")  # fmt: skip
        reference = snapshot("ref")
        same = server_kill(root, reference, full_s, log)
        print(f"server kill -9 mid-index, restarted: {int(same)}/1 equal to a full index")
        ok, n = redis_restart(redis, root, reference, log)
        print(f"Redis restart with jobs queued (AOF): {ok}/{n} equal to a full index")
        figures = concurrency(root, args.clients, args.seconds, log)
        for kind in ("search", "ask"):
            count, errors, p50, p95 = figures[kind]
            print(f"/{kind}: {count} requests, {errors} errors, p50 {p50:.0f} ms, "
                  f"p95 {p95:.0f} ms")  # fmt: skip
        print(f"second repository while loaded: {figures['second_repo_during_load']}")
    finally:
        redis.stop()
        print(f"logs and data: {WORK}")


if __name__ == "__main__":
    main()
