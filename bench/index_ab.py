"""A full index by two checkouts of coderag in one run: the same prepared tree, each checkout's
own ``coderag serve`` on loopback, one after the other (a baseline in the same run).

    git worktree add /tmp/before <commit>
    python -m bench.index_ab --before /tmp/before [--after .] [--corpus django:100000]

Prints the load average before the run and, per checkout, seconds to searchable and to
complete. Timings only count on a quiet machine (load average under 0.5 before).
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
    ap.add_argument("--corpus", default="django:100000")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="coderag-ab-"))
    try:
        root = prepare(args.corpus, tmp / "src")
        for label, checkout in (("before", args.before), ("after", args.after)):
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
                f"{label} ({checkout}): searchable {got['searchable_s']:.1f} s, "
                f"complete {got['complete_s']:.1f} s, {got['units']} units",
                flush=True,
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
