"""A full index by two checkouts of coderag in one run: the same prepared tree, each checkout's
own ``coderag serve`` on loopback, one after the other (a baseline in the same run).

    git worktree add /tmp/before <commit>
    python -m bench.index_ab --before /tmp/before [--after .] [--corpus django:100000 ...]

Prints, per corpus (``--corpus`` again for more; each alternates the two checkouts), the load
average before it and, per checkout, seconds to searchable and to complete, units, and the
complete index's lines per second. Timings only count on a quiet machine (load average under
0.5 before).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent

from bench.index_speed import free_port, prepare, start_server, wait_indexed, wait_up  # noqa: E402

PACKAGES = ("shared", "app", "services/embedder", "services/generator", "services/parser")
PACKAGES += ("services/retriever", "training")
"""Folders of a checkout that hold its importable packages."""


def python_path(checkout: Path) -> str:
    """PYTHONPATH that makes a server import ``checkout``'s code."""
    return ":".join(str(checkout.resolve() / p) for p in PACKAGES)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="the baseline checkout")
    ap.add_argument("--after", type=Path, default=HERE.parent, help="default: this checkout")
    ap.add_argument("--corpus", action="append", help="NAME or NAME:LINES (default django:100000)")
    args = ap.parse_args()
    for corpus in args.corpus or ["django:100000"]:
        run(corpus, args.before, args.after)
    return 0


def lines_of(root: Path) -> int:
    """Lines of the files of a prepared tree (what lines/s counts)."""
    total = 0
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.relative_to(root).parts:
            with path.open("rb") as f:
                total += sum(1 for _ in f)
    return total


def settle(limit: float = 0.5, most_s: float = 600) -> None:
    """Wait until the load average is under ``limit`` (the last run's load takes a minute or
    two to fade), at most ``most_s`` seconds."""
    deadline = time.monotonic() + most_s
    while os.getloadavg()[0] >= limit and time.monotonic() < deadline:
        time.sleep(10)


def run(corpus: str, before: Path, after: Path) -> None:
    """Index one corpus with each checkout in turn and print the figures."""
    settle()
    print(f"{corpus}: load average before: {os.getloadavg()[0]:.2f}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="coderag-ab-"))
    try:
        root = prepare(corpus, tmp / "src")
        lines = lines_of(root)
        for label, checkout in (("before", before), ("after", after)):
            data, port = tmp / label / "data", free_port()
            data.parent.mkdir(parents=True)
            proc = start_server(data, port, {"PYTHONPATH": python_path(checkout)})
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                wait_up(client, proc)
                t0 = time.perf_counter()
                client.post("/repos", json={"name": "ab", "path": str(root)}).raise_for_status()
                got = wait_indexed(client, "ab", t0)
            proc.terminate()
            proc.wait(30)
            print(
                f"{corpus} {label} ({checkout}): searchable {got['searchable_s']:.1f} s, "
                f"complete {got['complete_s']:.1f} s, {got['units']} units, {lines} lines, "
                f"{lines / got['complete_s']:.0f} lines/s",
                flush=True,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
