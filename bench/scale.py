"""Scale run: a pinned code base of over 500k lines (bench/scale.json, Django 5.1.4's source
archive from PyPI) indexed once by a real ``coderag serve`` on loopback.

    python -m bench.scale [--vector-minutes 10] [--complete] [--one-encoder]

It records the time to searchable (keyword, symbol and exact routes), ``/search`` p50/p95 while
the vectors are still being written (with the routes each answer says were ready), the vector
rate per space and the server's own estimate of the time left, the peak RSS of the server and of
its whole process tree (parser processes included), and the disk used by SQLite and Chroma. With
``--complete`` it waits for every vector (hours with both encoders on 2 CPU cores) and measures
``/search`` again on the complete index.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import git
import httpx

HERE = Path(__file__).resolve().parent

from bench.fetch import fetch  # noqa: E402
from bench.index_speed import free_port, lines_of, pct, start_server, wait_up  # noqa: E402

QUERIES = [
    "how does the ORM build the SQL for a filter with Q objects",
    "where is CSRF protection checked for a request",
    "how are migrations detected from model changes",
    "where does the template engine resolve a variable lookup",
    "how is a password hashed and checked",
    "where are URL patterns matched against the request path",
    "how does the admin build its change list",
    "QuerySet.select_related",
    "get_object_or_404",
    "where are signals sent when a model is saved",
    "怎么配置数据库连接池和持久连接",
    "模板里的过滤器是在哪里注册的",
    "用户登录后会话是怎么保存的",
    "where is the cache key for a view computed",
    "how does the test client send a request",
]
"""Queries timed against /search (each round runs all of them)."""


class TreeRss:
    """Samples the resident memory of a process and its descendants, keeping the peak of the
    whole tree and of each process in it (by pid, with its command name)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_tree_mb = 0.0
        self.peaks_mb: dict[int, float] = {}
        self.names: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _children(self, pid: int) -> list[int]:
        out = []
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                out += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
        return out

    @staticmethod
    def _status_mb(pid: int, field: str) -> float:
        """A memory line of /proc/PID/status (``VmRSS``, ``VmHWM``) in MB; 0 once it is gone."""
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            todo, seen, total = [self.pid], set(), 0.0
            while todo:
                p = todo.pop()
                if p in seen:
                    continue
                seen.add(p)
                rss = self._status_mb(p, "VmRSS")
                total += rss
                if p not in self.names:
                    self.names[p] = self._name(p)
                self.peaks_mb[p] = max(self.peaks_mb.get(p, 0.0), rss)
                todo += self._children(p)
            self.peak_tree_mb = max(self.peak_tree_mb, total)

    @staticmethod
    def _name(pid: int) -> str:
        """A process's command name (``comm``), or '?' once it is gone."""
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return "?"

    def server_peak_mb(self) -> float:
        """The server process's own high-water mark (VmHWM)."""
        return self._status_mb(self.pid, "VmHWM")

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()


def disk_mb(data: Path) -> dict[str, float]:
    """Megabytes under the data directory: SQLite files, Chroma, the rest."""
    out = {"sqlite": 0.0, "chroma": 0.0, "other": 0.0}
    for f in data.rglob("*"):
        if not f.is_file():
            continue
        size = f.stat().st_size / 2**20
        rel = f.relative_to(data).parts
        if "chroma" in rel[0]:
            out["chroma"] += size
        elif f.name.endswith((".db", ".db-wal", ".db-shm", ".sqlite3")):
            out["sqlite"] += size
        else:
            out["other"] += size
    return out


def search_round(client: httpx.Client, rounds: int) -> tuple[list[float], set[str], set[str]]:
    """Milliseconds of /search over the queries x rounds (after one warm-up query), and the
    routes the answers said were ready and still missing."""
    client.post("/search", json={"query": QUERIES[0], "repo": "scale"}).raise_for_status()
    ms, ready, missing = [], set(), set()
    for _ in range(rounds):
        for q in QUERIES:
            t = time.perf_counter()
            r = client.post("/search", json={"query": q, "repo": "scale", "top_k": 10})
            ms.append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
            body = r.json()
            ready |= set(body.get("routes_ready") or [])
            missing |= set(body.get("routes_missing") or [])
    return ms, ready, missing


def main() -> int:
    """Index the scale corpus once and print the figures as markdown."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vector-minutes", type=float, default=10.0)
    ap.add_argument("--complete", action="store_true", help="wait for every vector")
    ap.add_argument("--one-encoder", action="store_true", help="CODERAG_EMBED_MODEL_2= (MiniLM)")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    entry = json.loads((HERE / "scale.json").read_text())[0]
    src = fetch(entry)
    tmp = Path(tempfile.mkdtemp(prefix="coderag-scale-"))
    work = tmp / "django"
    shutil.copytree(src, work)
    repo = git.Repo.init(work)
    repo.git.add(A=True)
    repo.index.commit(f"django {entry['version']}", author=git.Actor("Bench", "b@x.invalid"))
    lines = lines_of(work)
    data = tmp / "data"
    data.mkdir()
    if args.one_encoder:
        os.environ["CODERAG_EMBED_MODEL_2"] = ""
    port = free_port()
    server = start_server(data, port)
    rss = TreeRss(server.pid)
    out: dict = {"lines": lines, "corpus": f"{entry['name']} {entry['version']}"}
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120)
        wait_up(client, server)
        t0 = time.perf_counter()
        client.post("/repos", json={"name": "scale", "path": str(work)}).raise_for_status()
        while True:
            body = client.get("/repos/scale").json()
            if body["status"] == "error":
                raise SystemExit(body["error"])
            if body["status"] == "ready":
                break
            time.sleep(0.2)
        out["searchable_s"] = time.perf_counter() - t0
        out["files"], out["units"] = body["files"], body["units"]
        ms, ready, missing = search_round(client, args.rounds)
        out["search_partial"] = (pct(ms, 0.5), pct(ms, 0.95), len(ms), ready, missing)
        deadline = t0 + out["searchable_s"] + args.vector_minutes * 60
        while time.perf_counter() < deadline or args.complete:
            body = client.get("/repos/scale").json()
            if body.get("complete"):
                out["complete_s"] = time.perf_counter() - t0
                break
            time.sleep(5)
        out["state"] = body
        out["elapsed_s"] = time.perf_counter() - t0
        if out.get("complete_s"):
            ms, ready, missing = search_round(client, args.rounds)
            out["search_complete"] = (pct(ms, 0.5), pct(ms, 0.95), len(ms), ready, missing)
        out["server_peak_mb"] = rss.server_peak_mb()
        out["tree_peak_mb"] = rss.peak_tree_mb
    finally:
        rss.stop()
        server.terminate()
        server.wait(60)
    out["disk"] = disk_mb(data)
    report(out)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def report(out: dict) -> None:
    """Print the run's figures."""
    print(f"Corpus: {out['corpus']}, {out['lines']:,} lines in the files the indexer reads, ")
    print(f"{out['files']:,} files, {out['units']:,} units.\n")
    print("| measure | value |\n| --- | --- |")
    print(f"| time to searchable (keyword, symbol, exact) | {out['searchable_s']:.1f} s |")
    p50, p95, n, ready, missing = out["search_partial"]
    print(
        f"| /search p50 / p95 while vectors are written (n={n}) | {p50:.0f} / {p95:.0f} ms "
        f"(ready: {', '.join(sorted(ready))}; waiting: {', '.join(sorted(missing)) or '-'}) |"
    )
    state = out["state"]
    vector_s = out["elapsed_s"] - out["searchable_s"]
    for space, st in sorted((state.get("stages") or {}).items()):
        done, total = st.get("done", 0), st.get("total")
        print(
            f"| vectors `{space}` after {out['elapsed_s']:.0f} s | {done} of {total} "
            f"({done / max(vector_s, 1e-3):.1f} units/s over the {vector_s:.0f} s after "
            "searchable) |"
        )
    if state.get("eta_s") is not None:
        print(f"| server's estimate of the time left | {state['eta_s'] / 3600:.1f} h |")
    if out.get("complete_s"):
        print(f"| time to complete | {out['complete_s']:.0f} s |")
        p50, p95, n, _, _ = out["search_complete"]
        print(f"| /search p50 / p95 on the complete index (n={n}) | {p50:.0f} / {p95:.0f} ms |")
    print(f"| peak RSS, server process | {out['server_peak_mb']:.0f} MB |")
    print(
        f"| peak RSS, server and its children (sampled every 0.5 s) | "
        f"{out['tree_peak_mb']:.0f} MB |"
    )
    d = out["disk"]
    print(
        f"| disk: SQLite / Chroma / other | {d['sqlite']:.0f} / {d['chroma']:.0f} / "
        f"{d['other']:.0f} MB |"
    )


if __name__ == "__main__":
    sys.exit(main())
