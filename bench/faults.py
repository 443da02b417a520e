"""Fault bench: real processes killed at seeded random points of an index of a pinned corpus,
a Redis restart mid-queue, and concurrent clients while another repository indexes.

Every repository is registered through ``POST /repos`` on a real ``coderag serve``; indexing runs
on ``coderag worker`` processes against a real redis-server on loopback (append-only file on).

1. ``kill -9`` of the worker (its process group: work horse and parser processes too) at
   ``--kills`` seeded random points of an index, then a new worker.
2. ``kill -9`` of the all-in-one server (jobs in-process) mid-index, then a restart.
3. A Redis restart (SIGTERM, append-only file) while one index runs and others wait in the queue.

For each: does the repository end ``ready`` and equal to a clean full index of the same tree
(units with their content hashes, files, symbols, calls, imports; per vector space, the vector
of every unit and nothing else, each carrying its unit's content hash)? The vector cache is
emptied before each trial, so every index encodes from scratch as a first index does.

4. ``--clients`` concurrent clients on /search and /ask for ``--seconds`` while a second corpus
   indexes: failures by cause, p50/p95 latency.

    nice python -m bench.faults                         # chi, 10 kills, 50 clients for 60 s
    nice python -m bench.faults --kills 2 --clients 5 --seconds 10   # a quick look
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PATHS = [str(ROOT / "shared"), *(str(p) for p in sorted((ROOT / "services").iterdir())), str(ROOT)]

from bench.fault_index import differences, empty_vector_cache, fingerprint  # noqa: E402
from bench.fault_load import run_load  # noqa: E402
from bench.fault_procs import (  # noqa: E402
    Server,
    corpus_repo,
    queue_sizes,
    ready_worker,
    running_jobs,
    stop_all,
)
from coderag.errors import NotFound  # noqa: E402
from coderag.settings import get_settings  # noqa: E402
from coderag.store import get_catalog  # noqa: E402
from harness.procs import QUEUES, RedisServer, kill9, stop  # noqa: E402

SETTLE_S = 900.0
"""A repository still queued or indexing this long after its fault counts as stuck."""


def state(name: str) -> str:
    """The repository's status, with its progress while it indexes."""
    try:
        repo = get_catalog().get_repo(name)
    except NotFound:
        return "missing"
    return f"{repo.status} ({repo.progress})" if repo.progress else repo.status


def settled(name: str, tick: Callable[[], None] | None = None) -> str:
    """Wait until a repository is ready or failed (calling ``tick`` meanwhile); its status, or
    ``stuck``."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        if settled_now(name):
            return state(name).split()[0]
        if tick is not None:
            tick()
        time.sleep(0.3)
    return "stuck"


def outcome(name: str, ref: dict, tick: Callable[[], None] | None = None) -> tuple[bool, str]:
    """(equal to the reference, a line saying how it ended)."""
    status = settled(name, tick)
    if status != "ready":
        return False, f"{status}: {get_catalog().get_repo(name).error or ''}"
    diff = differences(fingerprint(name), ref)
    return not diff, diff or "equal"


def timed_index(server: Server, name: str, root: Path) -> float:
    """Seconds a clean index takes (registered on the server, run by the idle worker)."""
    empty_vector_cache()
    start = time.monotonic()
    server.register(name, root)
    if settled(name) != "ready":
        raise SystemExit(f"the clean index {name} did not end ready: {state(name)}")
    return time.monotonic() - start


def worker_kills(
    server: Server, root: Path, ref: dict, points: list[float], log: Path
) -> tuple[int, int]:
    """Kill the worker ``points`` seconds into an index each time; (equal, kills mid-index)."""
    worker = ready_worker(log)
    equal = hit = 0
    for i, at in enumerate(points):
        name = f"kill{i}"
        empty_vector_cache()
        start = time.monotonic()
        server.register(name, root)
        time.sleep(max(0.0, start + at - time.monotonic()))
        when = f"{running_jobs(name)} job; {state(name)}"
        kill9(worker)
        worker = ready_worker(log)
        if when.endswith("ready"):
            print(f"  worker kill {i + 1}/{len(points)} at {at:.1f} s: the index had ended")
            continue
        hit += 1
        same, how = outcome(name, ref)
        equal += same
        print(f"  worker kill {i + 1}/{len(points)} at {at:.1f} s [{when}]: {how} "
              f"({time.monotonic() - start:.0f} s to settle)", flush=True)  # fmt: skip
    stop(worker)
    return equal, hit


def stage_kills(server: Server, root: Path, ref: dict, log: Path) -> tuple[int, int]:
    """Kill the worker the moment it takes each stage's job (parser, embedder, retriever), which
    random points rarely hit when one stage takes most of the time; (equal, stages hit)."""
    worker = ready_worker(log)
    equal = hit = 0
    for i, stage in enumerate(QUEUES):
        name = f"stage{i}"
        empty_vector_cache()
        server.register(name, root)
        while stage not in running_jobs(name).split("+") and not settled_now(name):
            time.sleep(0.02)
        if settled_now(name):
            print(f"  {stage} job: missed (the index ended before its job was seen)", flush=True)
            continue
        when = f"{running_jobs(name)} job; {state(name)}"
        kill9(worker)
        worker = ready_worker(log)
        hit += 1
        same, how = outcome(name, ref)
        equal += same
        print(f"  worker kill as the {stage} job ran [{when}]: {how}", flush=True)
    stop(worker)
    return equal, hit


def settled_now(name: str) -> bool:
    """Whether the repository has finished indexing (ready or error)."""
    return state(name).split()[0] in ("ready", "error")


def server_kills(root: Path, ref: dict, n: int, rng: random.Random, log: Path) -> tuple[int, int]:
    """Time a clean index on the all-in-one server (jobs in-process), then kill it at ``n``
    seeded points of that time and restart it; (equal, kills that came mid-index)."""
    server = Server(log, redis=False).start()
    full_s = timed_index(server, "server-ref", root)
    same = not differences(fingerprint("server-ref"), ref)
    stop(server.proc)
    points = [round(rng.uniform(0.03, 0.97) * full_s, 1) for _ in range(n)]
    print(f"  in-process clean index: {full_s:.0f} s, {'equal' if same else 'DIFFERENT'} to the "
          f"worker's; kill points (seconds after POST /repos): {points}", flush=True)  # fmt: skip
    equal = hit = 0
    for i, at in enumerate(points):
        name = f"server{i}"
        empty_vector_cache()
        server.start()
        start = time.monotonic()
        server.register(name, root)
        time.sleep(max(0.0, start + at - time.monotonic()))
        when = state(name)
        kill9(server.proc)
        if settled_now(name):
            print(f"  server kill {i + 1}/{n} at {at:.1f} s: the index had ended; not counted")
            continue
        hit += 1
        server.start()  # its start-up heal finds the index its killed self left
        same, how = outcome(name, ref)
        equal += same
        stop(server.proc)
        print(f"  server kill {i + 1}/{n} at {at:.1f} s [{when}]: {how}", flush=True)
    return equal, hit


def redis_restart(
    server: Server, redis: RedisServer, root: Path, ref: dict, n: int, at: float, log: Path
) -> int:
    """Restart Redis ``at`` seconds after ``n`` indexes were queued (the first one running);
    a worker that dies with the connection is started again, as a supervisor would."""
    worker = ready_worker(log)
    names = [f"queued{i}" for i in range(n)]
    empty_vector_cache()
    start = time.monotonic()
    for name in names:
        server.register(name, root)
    time.sleep(max(0.0, start + at - time.monotonic()))
    before = queue_sizes()
    when = [f"{running_jobs(n)} job; {state(n)}" for n in names]
    redis.stop()
    redis.start()
    print(f"  Redis restarted at {at:.1f} s {when}: queued jobs {before} before, "
          f"{queue_sizes()} after", flush=True)  # fmt: skip
    box = [worker]

    def revive() -> None:
        if box[0].poll() is not None:
            print(f"  the worker exited ({box[0].returncode}); starting another", flush=True)
            box[0] = ready_worker(log)

    equal = 0
    for name in names:
        same, how = outcome(name, ref, revive)
        equal += same
        print(f"  {name}: {how}", flush=True)
    stop(box[0])
    return equal


def load(server: Server, busy_root: Path, served: str, clients: int, seconds: float) -> None:
    """Concurrent clients on ``served`` while ``busy_root`` indexes; prints the figures."""
    worker = ready_worker(server.log)
    for kind in ("search", "ask"):  # the first query builds the served repository's indexes
        httpx.post(f"{server.base}/{kind}", json={"query": "router", "repo": served}, timeout=300)
    server.register("busy", busy_root)
    while state("busy").split()[0] == "queued":
        time.sleep(0.2)
    before = state("busy")
    tallies = run_load(server.base, served, clients, seconds)
    after = state("busy")
    print(f"load average (1 min) at the end of the load: {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    stop(worker)
    for kind, t in tallies.items():
        failed = sum(t.failures.values())
        causes = ", ".join(f"{k} ×{v}" for k, v in t.failures.most_common()) or "none"
        print(f"/{kind}: {len(t.ms)} requests, {failed} errors ({causes}), "
              f"p50 {t.percentile(50):.0f} ms, p95 {t.percentile(95):.0f} ms")  # fmt: skip
    print(f"second repository: {before} when the load began, {after} when it ended")


def main() -> None:
    """Run every fault and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default="chi", help="pinned corpus (bench/corpora.json) to index")
    ap.add_argument("--subdir", default="_examples", help="folder of the corpus to index")
    ap.add_argument("--busy-corpus", default="toml_rs", help="indexed during the load")
    ap.add_argument("--kills", type=int, default=10, help="worker kills")
    ap.add_argument("--stage-kills", type=int, default=1, help="1: also kill once per stage")
    ap.add_argument("--server-kills", type=int, default=3)
    ap.add_argument("--queued", type=int, default=3, help="indexes queued at the Redis restart")
    ap.add_argument("--seed", type=int, default=12, help="seed of the kill points")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--lease", type=float, default=5.0, help="CODERAG_JOB_LEASE_S of every process")
    ap.add_argument("--second-encoder", action="store_true",
                    help="keep the second encoder (vector2); about 10x slower on CPU")  # fmt: skip
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what it started on the way out
    work = Path(tempfile.mkdtemp(prefix="coderag-faults-"))
    os.environ.update(
        CODERAG_DATA_DIR=str(work / "data"),
        CODERAG_REPO_ROOTS=str(work),
        CODERAG_JOB_LEASE_S=str(args.lease),
        PYTHONPATH=os.pathsep.join(PATHS),
    )
    if not args.second_encoder:
        os.environ["CODERAG_EMBED_MODEL_2"] = ""
    redis = RedisServer(work / "redis").start()
    os.environ["REDIS_URL"] = redis.url
    get_settings.cache_clear()
    log = work / "processes.log"
    root = corpus_repo(args.corpus, args.subdir, work / args.corpus)
    busy_root = corpus_repo(args.busy_corpus, "", work / args.busy_corpus)
    server = Server(log, redis=True).start()
    try:
        worker = ready_worker(log)
        full_s = timed_index(server, "ref", root)
        stop(worker)
        ref = fingerprint("ref")
        units = get_catalog().get_repo("ref").units
        busy = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        print(f"{args.corpus}/{args.subdir}: {units} units; a clean full index took "
              f"{full_s:.0f} s ({busy})", flush=True)  # fmt: skip
        rng = random.Random(args.seed)
        points = [round(rng.uniform(0.03, 0.97) * full_s, 1) for _ in range(args.kills)]
        if points:
            print(f"worker kill points (seed {args.seed}, seconds after POST /repos): {points}")
            ok, hit = worker_kills(server, root, ref, points, log)
            print(f"worker kill -9 at random points: {ok} of {hit} equal to a full index")
        if args.stage_kills:
            ok, hit = stage_kills(server, root, ref, log)
            print(f"worker kill -9 as each stage's job ran: {ok} of {hit} equal to a full index")
        if args.server_kills:
            ok, hit = server_kills(root, ref, args.server_kills, rng, log)
            print(f"server kill -9 mid-index, restarted: {ok} of {hit} equal to a full index")
        at = round(rng.uniform(0.03, 0.97) * full_s, 1)
        if args.queued:
            ok = redis_restart(server, redis, root, ref, args.queued, at, log)
            print(f"Redis restart mid-queue (append-only file): {ok} of {args.queued} equal")
        if args.clients:
            load(server, busy_root, "ref", args.clients, args.seconds)
    finally:
        stop_all()
        redis.stop()
        print(f"logs and data: {work}")


if __name__ == "__main__":
    main()
