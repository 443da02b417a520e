"""Incremental versus full indexing on a real history, through a real server on loopback.

Two released versions of a library (bench/history.json, pinned by sha256) are committed one after
the other into a git repository. The script times: the full index of the first version, the
incremental reindex to the second version, and a one-file commit from the signed GitHub webhook
to the moment /search returns the new function first.

    python -m bench.incremental [--port 8765] [--one-encoder] [--files N]

Before the one-file commit one query is made, as on any repository in use, so the retriever's in-
memory index is that of the indexed version. Each step is timed twice: to searchable (the keyword,
symbol and exact stage published: status ``ready``; for the one-file commit, /search returning the
new function first) and to complete (every vector written). ``--one-encoder`` leaves the second
encoder out (the figures before progressive indexing were taken so); ``--files N`` keeps the first
N Python files of each version (sorted paths, ``pygments/util.py`` always among them) for a run
that fits a shared machine.

After the server stops, the retriever's in-memory index is built from its catalog in this process
and brought up to date after a one-file change, to time each.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import git
import httpx

HERE = Path(__file__).resolve().parent

from bench.fetch import fetch  # noqa: E402

SECRET = "bench-secret"
"""Webhook secret shared by the bench and its server."""

REMOTE = "https://git.example.invalid/bench/pygments.git"

LATENCY_QUERIES = [
    "how is a lexer chosen for a file name",
    "where are token types defined",
    "HtmlFormatter line numbers",
    "how does the regex lexer handle states",
    "get_lexer_by_name",
    "where is the style for terminal output",
    "how are filters applied",
    "what happens when no lexer matches",
    "guess the lexer from the content",
    "怎么根据文件名选择词法分析器",
    "输出 HTML 时行号是怎么生成的",
    "注册新的格式化器在哪里",
    "how are plugins discovered through entry points",
    "escape html characters",
    "where is the command line interface",
    "LaTeX formatter escape",
    "how are tokens merged",
    "where is the default style",
    "how is the encoding of the input detected",
    "bygroups",
]
"""Queries timed against /search on the indexed history (20 queries × 5 rounds)."""
"""Origin URL the webhook payload names (never contacted)."""


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replace_tree(work: Path, src: Path) -> None:
    """Make the work tree's files those of ``src`` (keeping .git)."""
    for child in work.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    shutil.copytree(src, work, dirs_exist_ok=True)


def commit(repo: git.Repo, message: str) -> str:
    """Commit everything; return the sha."""
    repo.git.add(A=True)
    repo.index.commit(message, author=git.Actor("Bench", "bench@example.invalid"))
    return repo.head.commit.hexsha


def wait(client: httpx.Client, name: str, last: dict | None, t0: float) -> tuple[dict, float]:
    """Poll until the repository is complete again after its state ``last``; returns its state
    and the seconds from ``t0`` to when a new keyword stage was published."""
    searchable = None
    after = last["indexed_at"] if last else None
    before = last.get("searchable_at") if last else None
    while True:
        body = client.get(f"/repos/{name}").json()
        if body["status"] == "error":
            raise SystemExit(f"indexing failed: {body['error']}")
        fresh = body.get("searchable_at") and body["searchable_at"] != before
        if searchable is None and body["status"] == "ready" and fresh:
            searchable = time.perf_counter() - t0
        if body["status"] == "ready" and body["indexed_at"] != after and body.get("complete"):
            return body, searchable if searchable is not None else time.perf_counter() - t0
        time.sleep(0.05)


def subset(src: Path, dest: Path, files: int) -> Path:
    """The first ``files`` Python files of a version (sorted), util.py always among them."""
    chosen = sorted(p.relative_to(src) for p in src.rglob("*.py"))[:files]
    util = Path("pygments/util.py")
    for rel in {*chosen, util}:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / rel, dest / rel)
    return dest


def keyword_p95_ms(index, queries: list[str]) -> tuple[float, float]:
    """p95 ms of the keyword route's BM25 (top 50) over the queries x 5, with the postings and
    with a bm25s index of the same documents (the structure before this change)."""
    import bm25s

    from coderag_retriever.index import bm25_scores
    from coderag_retriever.query import Query

    docs = [d for path in sorted(index.files) for d in index.files[path].documents]
    reference = bm25s.BM25()
    reference.index([d or ["\u2205"] for d in docs], show_progress=False)
    tokens = [Query("history", q).tokens for q in queries]
    ours, theirs = [], []
    for _ in range(5):
        for t in tokens:
            start = time.perf_counter()
            bm25_scores(index, t, 50)
            ours.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            if t:
                reference.retrieve([t], k=50, show_progress=False)
            theirs.append((time.perf_counter() - start) * 1000)
    return sorted(ours)[int(len(ours) * 0.95)], sorted(theirs)[int(len(theirs) * 0.95)]


def index_update_ms(data: Path, name: str) -> tuple[float, float, int, tuple[float, float]]:
    """(ms to build the retriever's index of the whole catalog, ms to update it after
    pygments/util.py changed, units, keyword p95 ms ours and bm25s') in this process, from the
    server's data directory."""
    os.environ["CODERAG_DATA_DIR"] = str(data)
    from coderag.settings import get_settings
    from coderag.store import get_catalog
    from coderag_retriever.index import build, update

    get_settings.cache_clear()
    catalog = get_catalog()
    t = time.perf_counter()
    index = build(catalog, name, 1)
    full = (time.perf_counter() - t) * 1000
    old = index.files["pygments/util.py"]
    index.files["pygments/util.py"] = dataclasses.replace(old, sha="stale")
    t = time.perf_counter()
    updated = update(catalog, name, index, 2)
    one = (time.perf_counter() - t) * 1000
    assert updated.read == ["pygments/util.py"], updated.read
    return full, one, len(updated), keyword_p95_ms(updated, LATENCY_QUERIES)


def main() -> int:
    """Run the three timings and print a markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--one-encoder", action="store_true", help="CODERAG_EMBED_MODEL_2= (MiniLM)")
    ap.add_argument("--files", type=int, default=0, help="first N Python files of each version")
    args = ap.parse_args()
    entries = json.loads((HERE / "history.json").read_text())
    roots = [fetch(e) for e in entries]
    tmp = Path(tempfile.mkdtemp(prefix="coderag-incremental-"))
    if args.files:
        roots = [subset(r, tmp / f"v{i}", args.files) for i, r in enumerate(roots)]
    work = tmp / "repo"
    work.mkdir()
    repo = git.Repo.init(work)
    repo.create_remote("origin", REMOTE)
    replace_tree(work, roots[0])
    commit(repo, f"v{entries[0]['version']}")
    lines = sum(
        p.read_text("utf-8", "replace").count("\n")
        for p in work.rglob("*.py")
        if ".git" not in p.parts
    )
    port = args.port or free_port()
    env = {**os.environ, "CODERAG_DATA_DIR": str(tmp / "data"), "CODERAG_WEBHOOK_SECRET": SECRET}
    env["CODERAG_REPO_ROOTS"] = str(tmp)
    if args.one_encoder:
        env["CODERAG_EMBED_MODEL_2"] = ""
    server = subprocess.Popen(
        [sys.executable, "-m", "coderag_app.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rows = []
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
        for _ in range(600):
            try:
                client.get("/health")
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        t = time.perf_counter()
        client.post("/repos", json={"name": "history", "path": str(work)})
        first, searchable = wait(client, "history", None, t)
        full = time.perf_counter() - t
        rows.append(
            (
                f"full index of v{entries[0]['version']}",
                first["files"],
                first["units"],
                searchable,
                full,
            )
        )
        for q in LATENCY_QUERIES:  # warm-up round: the first query builds the in-memory indexes
            client.post("/search", json={"query": q, "repo": "history", "top_k": 10})
        latencies = []
        for _ in range(5):
            for q in LATENCY_QUERIES:
                t = time.perf_counter()
                client.post("/search", json={"query": q, "repo": "history", "top_k": 10})
                latencies.append((time.perf_counter() - t) * 1000)
        latencies.sort()

        replace_tree(work, roots[1])
        commit(repo, f"v{entries[1]['version']}")
        t = time.perf_counter()
        client.post("/repos/history/reindex")
        second, searchable = wait(client, "history", first, t)
        rows.append(
            (
                f"incremental v{entries[0]['version']} -> v{entries[1]['version']}",
                second["files"],
                second["units"],
                searchable,
                time.perf_counter() - t,
            )
        )

        # A push lands on a repository people are querying: one query first, so the in-memory
        # index is that of the indexed version (as after any query), not still being rebuilt.
        client.post("/search", json={"query": "get_lexer_by_name", "repo": "history", "top_k": 1})
        target = work / "pygments" / "util.py"
        target.write_text(
            target.read_text()
            + (
                "\n\ndef zebra_checksum_of_tokens(tokens):\n"
                '    """Fold token lengths into a zebra checksum."""\n'
                "    return sum(len(t) for t in tokens) % 65521\n"
            )
        )
        sha = commit(repo, "add zebra checksum")
        payload = json.dumps(
            {
                "ref": "refs/heads/" + repo.active_branch.name,
                "after": sha,
                "repository": {"clone_url": REMOTE, "html_url": REMOTE.removesuffix(".git")},
            }
        ).encode()
        signature = "sha256=" + hmac.new(SECRET.encode(), payload, hashlib.sha256).hexdigest()
        t = time.perf_counter()
        r = client.post(
            "/webhooks/github",
            content=payload,
            headers={
                "X-GitHub-Event": "push",
                "X-GitHub-Delivery": sha,
                "X-Hub-Signature-256": signature,
                "Content-Type": "application/json",
            },
        )
        ack = time.perf_counter() - t
        if r.status_code != 202:
            raise SystemExit(f"webhook answered {r.status_code}: {r.text}")
        # The new function's own name: an identifier query passes the score gate however it is
        # embedded, so the loop waits for the index, not for the gate.
        while True:
            hits = client.post(
                "/search",
                json={"query": "zebra_checksum_of_tokens", "repo": "history", "top_k": 1},
            ).json()["results"]
            if hits and hits[0]["symbol"] == "zebra_checksum_of_tokens":
                break
            if time.perf_counter() - t > 600:
                raise SystemExit("the one-file commit was not searchable within 600 s")
            time.sleep(0.02)
        one = time.perf_counter() - t
        third, _ = wait(client, "history", second, t)
        rows.append(
            (
                "one-file commit: webhook -> searchable",
                third["files"],
                third["units"],
                one,
                time.perf_counter() - t,
            )
        )
        server.terminate()
        server.wait(30)
        build_ms, update_ms, units, (ours, theirs) = index_update_ms(tmp / "data", "history")
    finally:
        if server.poll() is None:
            server.terminate()
            server.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"History: {lines:,} lines of Python in v{entries[0]['version']}.\n")
    encoders = "MiniLM only" if args.one_encoder else "both encoders"
    print(f"Encoders: {encoders}.\n")
    print("| step | files | units | searchable s | complete s |")
    print("| --- | --- | --- | --- | --- |")
    for step, files, n, searchable, secs in rows:
        print(f"| {step} | {files} | {n} | {searchable:.2f} | {secs:.2f} |")
    print(
        f"\nWebhook answered 202 in {ack * 1000:.0f} ms. Full index (complete) / one-file "
        f"update (searchable): {full / one:.0f}x; to complete: {full / rows[-1][-1]:.0f}x."
    )
    print(
        f"Retriever index of the {units} units, in this process: full build {build_ms:.0f} ms, "
        f"update after one changed file {update_ms:.0f} ms. Keyword route BM25 top 50, p95 of "
        f"{len(LATENCY_QUERIES) * 5}: postings {ours:.1f} ms, bm25s on the same documents "
        f"{theirs:.1f} ms."
    )
    p50, p95 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.95)]
    print(
        f"/search over HTTP on the indexed history ({len(latencies)} requests, after one "
        f"warm-up round): p50 {p50:.0f} ms, p95 {p95:.0f} ms."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
