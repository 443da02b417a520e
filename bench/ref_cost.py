"""What a second branch costs: a pinned code base indexed once, then a branch that changes
``--files`` files added as a ref, against a full index of the same branch as its own repository,
all in one ``coderag serve`` on loopback.

    python -m bench.ref_cost [--corpus django:100000] [--files 10] [--out FILE]

It reports, for the full index, the ref and the full index of the branch: seconds to complete
and texts encoded (new rows of the embedding cache), with the load average before the run. That
a ref's parse reads only the files that differ is tests/test_refs.py's assertion. Counts are
exact on any machine; the seconds are figures only on a quiet one (load average under 0.5).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import git
import httpx

HERE = Path(__file__).resolve().parent

from bench.index_speed import POLL_S, free_port, lines_of, prepare, start_server, wait_up  # noqa: E402

CHANGE = "\n\ndef bench_branch_change_{n}(value):\n    return value * {n}\n"
"""Appended to each changed file: one new function per file (Python corpora)."""


def encoded(data: Path) -> int:
    """Rows of the embedding cache: texts encoded so far, once per encoder."""
    with sqlite3.connect(data / "coderag.db") as db:
        return db.execute("SELECT COUNT(*) FROM embed_cache").fetchone()[0]


def wait_complete(client: httpx.Client, url: str, t0: float) -> float:
    """Seconds from ``t0`` until the repository or ref at ``url`` is complete."""
    while True:
        body = client.get(url).json()
        if body.get("status") == "error":
            raise SystemExit(f"{url}: {body.get('error')}")
        if body.get("status") == "ready" and body.get("complete"):
            return time.perf_counter() - t0
        time.sleep(POLL_S)


def branch(root: Path, files: int) -> list[str]:
    """Make branch ``bench`` changing ``files`` Python files spread over the tree; their paths."""
    repo = git.Repo(root)
    repo.git.checkout("-b", "bench")
    py = sorted(p for p in root.rglob("*.py") if ".git" not in p.parts)
    step = max(1, len(py) // files)
    picked = py[::step][:files]
    for n, path in enumerate(picked):
        with path.open("a") as f:
            f.write(CHANGE.format(n=n))
    repo.git.add(A=True)
    repo.index.commit("bench branch", author=git.Actor("Bench", "b@x.invalid"))
    repo.git.checkout("-")
    return [str(p.relative_to(root)) for p in picked]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="django:100000")
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="coderag-refcost-"))
    try:
        root = prepare(args.corpus, tmp / "src")
        lines = lines_of(root)
        changed = branch(root, args.files)
        data, port = tmp / "data", free_port()
        proc = start_server(data, port)
        rows = []
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            wait_up(client, proc)
            steps = [
                ("full index (main)", "/repos", {"name": "main", "path": str(root)}, "/repos/main"),
                ("ref bench", "/repos/main/refs", {"ref": "bench"}, "/repos/main/refs/bench"),
            ]
            for label, post, body, poll in steps:
                before, t0 = encoded(data), time.perf_counter()
                client.post(post, json=body).raise_for_status()
                seconds = wait_complete(client, poll, t0)
                rows.append((label, seconds, encoded(data) - before))
            clone = tmp / "branch"
            git.Repo(root).clone(clone, branch="bench")
            before, t0 = encoded(data), time.perf_counter()
            client.post("/repos", json={"name": "branch", "path": str(clone)}).raise_for_status()
            seconds = wait_complete(client, "/repos/branch", t0)
            label = "full index of the branch (cache warm)"
            rows.append((label, seconds, encoded(data) - before))
        proc.terminate()
        proc.wait(30)
        print(f"{args.corpus}: {lines} lines, {len(changed)} files changed; load {load:.2f}")
        print("| index | seconds to complete | texts encoded |")
        print("| --- | --- | --- |")
        for label, seconds, texts in rows:
            print(f"| {label} | {seconds:.1f} | {texts} |")
        if args.out:
            out = {"corpus": args.corpus, "lines": lines, "load": load, "changed": changed}
            out["rows"] = [dict(zip(("index", "s", "encoded"), r, strict=True)) for r in rows]
            args.out.write_text(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
