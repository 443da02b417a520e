"""Scale run with workers: one git repository of over a million lines built from the pinned
source archives of ``bench/scale.json`` (Django 5.1.4 from PyPI; golang.org/x/tools,
cloud.google.com/go and tokio from Debian), indexed by the API server and separate
``coderag worker`` processes through Redis, a ``chroma run`` server and the database.

    python -m bench.scale_workers [--workers 2] [--max-lines N] [--one-encoder] [--postgres]
                                  [--out bench/results/scale_workers.json]

Each archive is fetched and checked against its sha256 (``bench/fetch.py``), every file the
indexer reads is copied under a folder named after the archive (``--max-lines`` stops copying
past that many lines, for a quick look), and the whole is committed once with fixed dates. The
repository is registered by its ``file://`` URL, so each worker clones it into its data directory
as a worker on another host would.

Each worker listens on every queue (``coderag worker parser embedder retriever``): a repository's
chain is one job per stage, so two workers do not split one repository's parse or its vectors;
they are what a second host is, a place for the next job and a survivor when one dies (see
docs/SCALING.md). With ``CODERAG_DATABASE_URL`` set (or ``--postgres``, which starts a
throwaway PostgreSQL server with the tests' settings: fsync off, so its writes cost less than a
durable server's), every worker gets a data directory, HOME and TMPDIR of its own, sharing only
the services; with SQLite they share the API's data directory, where the database file is.

It records the load average before the run, the time to searchable and to complete (from
``POST /repos``), the peak RSS of every process (sampled every 0.5 s from /proc: the API server,
each worker and the work horses and parser processes under it, Redis, Chroma, PostgreSQL when
started here), the database size
(the SQLite files, or ``pg_database_size``) and the Chroma server's folder, as JSON and as a
table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PATHS = [str(ROOT / "shared"), *(str(p) for p in sorted((ROOT / "services").iterdir())), str(ROOT)]

from bench.fault_procs import GIT_DATES, Server, ready_worker, stop_all  # noqa: E402
from bench.fetch import fetch  # noqa: E402
from bench.scale import TreeRss  # noqa: E402
from harness.procs import RedisServer, free_port, start_chroma, stop, worker_env  # noqa: E402

SCALE_FILE = BENCH / "scale.json"
"""The pinned archives the repository is made of, each under a folder of its name."""

REPO = "scale"
"""The repository's name in the index."""


def build_repo(entries: list[dict], dest: Path, max_lines: int | None) -> dict[str, int]:
    """Copy every file the indexer reads from each archive's root to ``dest/<name>/`` (with
    ``max_lines``, about an equal share of that many lines from each archive, so a slice mixes
    the languages too) and commit them as one git repository; the lines copied per archive."""
    import subprocess

    from coderag_parser.files import indexable, read_source, walk

    lines: dict[str, int] = {}
    for entry in entries:
        budget = None if max_lines is None else max_lines // len(entries)
        src = fetch(entry)
        lines[entry["name"]] = 0
        for rel in sorted(r for r in walk(src) if indexable(r)):
            text, _ = read_source(src / rel, 1_000_000)
            count = text.count("\n") + 1 if text else 0
            target = dest / entry["name"] / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src / rel, target)
            lines[entry["name"]] += count
            if budget is not None:
                budget -= count
                if budget <= 0:
                    break
    env = {**os.environ, **GIT_DATES, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "b@x.org"}
    env |= {"GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "b@x.org"}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "scale"]):
        subprocess.run(["git", *cmd], cwd=dest, env=env, check=True)
    return lines


def database_mb(data: Path) -> tuple[str, float]:
    """(what was measured, megabytes): PostgreSQL's ``pg_database_size`` when
    ``CODERAG_DATABASE_URL`` is set, else the SQLite file with its WAL and shared memory."""
    url = os.environ.get("CODERAG_DATABASE_URL")
    if url:
        import psycopg  # the store's PostgreSQL driver, which takes the setting's URL as it is

        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        return "postgresql", int(row[0] if row else 0) / 2**20
    files = [data / f"coderag.db{s}" for s in ("", "-wal", "-shm")]
    return "sqlite", sum(f.stat().st_size for f in files if f.is_file()) / 2**20


def folder_mb(path: Path) -> float:
    """Megabytes of the files under ``path``."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def own_dirs(root: Path) -> dict[str, str]:
    """A data directory, HOME and TMPDIR of a worker's own, as environment variables."""
    for sub in ("data", "home", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return {
        "CODERAG_DATA_DIR": str(root / "data"),
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
    }


def wait_states(client: httpx.Client, t0: float, timeout_s: float) -> dict[str, Any]:
    """Poll the repository until complete: seconds from ``t0`` to searchable and to complete,
    and its last state."""
    out: dict[str, Any] = {"searchable_s": None, "complete_s": None}
    deadline = t0 + timeout_s
    while time.perf_counter() < deadline:
        body = client.get(f"/repos/{REPO}").json()
        now = time.perf_counter() - t0
        if body["status"] == "error":
            raise SystemExit(f"indexing failed: {body['error']}")
        if body["status"] == "ready" and out["searchable_s"] is None:
            out["searchable_s"] = now
        if body["status"] == "ready" and body.get("complete"):
            out["complete_s"] = now
            break
        time.sleep(1.0)
    out["state"] = body
    return out


def peaks(rss: TreeRss) -> dict[str, Any]:
    """Peak RSS under a started process: its own, each child's (rq work horses, parser
    processes, git) by pid with its command name, and the whole tree's at one sample."""
    children = {
        str(pid): {"name": rss.names[pid], "peak_mb": round(mb, 1)}
        for pid, mb in sorted(rss.peaks_mb.items())
        if pid != rss.pid
    }
    return {
        "pid": rss.pid,
        "peak_mb": round(rss.peaks_mb.get(rss.pid, 0.0), 1),
        "children": children,
        "tree_peak_mb": round(rss.peak_tree_mb, 1),
    }


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Build the repository, start every process, index it once and measure."""
    out: dict[str, Any] = {"load_before": os.getloadavg(), "workers": args.workers}
    entries = json.loads(SCALE_FILE.read_text())
    work = tmp / "repo"
    out["lines"] = build_repo(entries, work, args.max_lines)
    out["total_lines"] = sum(out["lines"].values())
    data = tmp / "api" / "data"
    data.mkdir(parents=True)
    postgres = None
    if args.postgres:
        from harness.postgres import Postgres, binaries

        postgres = Postgres(binaries() or Path("/usr/bin"), free_port())
        postgres.start()
        os.environ["CODERAG_DATABASE_URL"] = postgres.create("scale")
    try:
        return _measure(args, tmp, data, out, postgres)
    finally:
        if postgres is not None:
            postgres.stop()


def _measure(
    args: argparse.Namespace, tmp: Path, data: Path, out: dict[str, Any], postgres: Any
) -> dict[str, Any]:
    """Start Redis, Chroma, the API server and the workers; index the repository and measure."""
    work = tmp / "repo"
    redis = RedisServer(tmp / "redis", appendonly=False).start()
    chroma, chroma_url = start_chroma(tmp / "chroma")
    env = {
        "REDIS_URL": redis.url,
        "CODERAG_CHROMA_URL": chroma_url,
        "CODERAG_DATA_DIR": str(data),
        "CODERAG_URL_SCHEMES": "file",
        "CODERAG_REPO_ROOTS": str(tmp),
    }
    if args.one_encoder:
        env["CODERAG_EMBED_MODEL_2"] = ""
    os.environ.update(env)  # the server and the workers start from this environment
    server = Server(tmp / "api.log", redis=True).start()
    watched = {
        "api": TreeRss(server.proc.pid),
        "redis": TreeRss(redis.proc.pid),
        "chroma": TreeRss(chroma.pid),
    }
    if postgres is not None:  # the postmaster's pid heads its pid file; backends are its children
        pid = int((postgres.data / "postmaster.pid").read_text().split()[0])
        watched["postgresql"] = TreeRss(pid)
    separate = bool(os.environ.get("CODERAG_DATABASE_URL"))
    for i in range(1, args.workers + 1):
        extra = own_dirs(tmp / f"worker-{i}") if separate else {}
        proc = ready_worker(tmp / f"worker-{i}.log", worker_env(**extra))
        watched[f"worker-{i}"] = TreeRss(proc.pid)
    try:
        client = httpx.Client(base_url=server.base, timeout=120)
        out["load_at_post"] = os.getloadavg()  # the repository built, every process up
        t0 = time.perf_counter()
        r = client.post("/repos", json={"name": REPO, "url": work.as_uri()})
        if r.status_code != 202:
            raise SystemExit(f"POST /repos: {r.status_code} {r.text}")
        out |= wait_states(client, t0, args.timeout_h * 3600)
        out["database"] = database_mb(data)
        out["chroma_mb"] = folder_mb(tmp / "chroma")
        out["processes"] = {role: peaks(rss) for role, rss in watched.items()}
    finally:
        for rss in watched.values():
            rss.stop()
        stop_all()
        stop(chroma)
        redis.stop()
    return out


def report(out: dict[str, Any]) -> None:
    """Print the run's figures as markdown."""
    parts = ", ".join(f"{n} {c:,}" for n, c in out["lines"].items())
    state = out["state"]
    print(f"Corpus: {out['total_lines']:,} lines ({parts}); {state.get('files', 0):,} files, ")
    print(f"{state.get('units', 0):,} units; {out['workers']} worker processes.\n")
    load = ", ".join(f"{x:.2f}" for x in out["load_before"])
    at_post = ", ".join(f"{x:.2f}" for x in out["load_at_post"])
    searchable, complete = out["searchable_s"], out["complete_s"]
    print("| measure | value |\n| --- | --- |")
    print(f"| load average before the run (1, 5, 15 min) | {load} |")
    print(f"| load average at POST /repos, every process up | {at_post} |")
    print(f"| time to searchable | {searchable:.1f} s |" if searchable else "| searchable | no |")
    print(f"| time to complete | {complete:.1f} s |" if complete else "| complete | no |")
    kind, mb = out["database"]
    print(f"| database ({kind}) | {mb:.1f} MB |")
    print(f"| Chroma server folder | {out['chroma_mb']:.1f} MB |")
    print(
        "\n| process | peak RSS | children seen (largest peak) | whole tree at one sample |\n"
        "| --- | --- | --- | --- |"
    )
    for role, row in out["processes"].items():
        kids = row["children"].values()
        largest = max((k["peak_mb"] for k in kids), default=0.0)
        print(
            f"| {role} (pid {row['pid']}) | {row['peak_mb']:.0f} MB | {len(kids)} "
            f"({largest:.0f} MB) | {row['tree_peak_mb']:.0f} MB |"
        )


def main() -> int:
    """Run once, write the JSON and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2, help="coderag worker processes")
    ap.add_argument("--max-lines", type=int, help="copy about this many lines, for a quick look")
    ap.add_argument("--one-encoder", action="store_true", help="CODERAG_EMBED_MODEL_2= (MiniLM)")
    ap.add_argument("--postgres", action="store_true", help="start a throwaway PostgreSQL")
    ap.add_argument("--timeout-h", type=float, default=6.0, help="give up after this long")
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "scale_workers.json")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="coderag-scale-workers-"))
    try:
        out = run(args, tmp)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, default=str) + "\n")
    report(out)
    print(f"\nwritten to {args.out}" + (f"; files kept in {tmp}" if args.keep else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
