"""What users reach for, timed (issue 14): the MCP ``search_code`` round trip against ``POST
/search`` on the same index and questions, and the ``/metrics`` scrape time, on the test-split
index (8 code bases, about 100k indexed lines), through a real ``coderag serve`` on loopback.

    python -m bench.surface [--data bench/.cache/data-test] [--repo marshmallow] [--calls 20]

The index is copied to a temporary folder first: the server never writes into ``--data``. The MCP
calls go through the SDK's client over streamable HTTP (one session, one ``call_tool`` per
question); ``/search`` through httpx with the same body, the two interleaved question by
question. Each is warmed up once (the encoders load on the first query). Prints p50/p95 of each
and the load average around the run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent

from bench.index_speed import free_port, pct, start_server, wait_up  # noqa: E402

QUESTIONS = (
    "how are nested fields serialized",
    "where is a required field validated",
    "how does post_load turn data into an object",
    "where are validation errors collected per field",
    "how is the many option of a schema handled",
    "how are unknown fields excluded or raised",
    "where is a datetime field parsed from a string",
    "how does a schema dump only some fields",
)
"""Questions asked in turn (marshmallow's, the largest test-split code base)."""


def indexed_lines(data: Path) -> tuple[int, int, int]:
    """(repositories, files, lines) indexed in a data directory's catalog."""
    db = sqlite3.connect(f"file:{data / 'coderag.db'}?mode=ro", uri=True)
    try:
        repos = db.execute("SELECT count(*) FROM repos").fetchone()[0]
        files, lines = db.execute("SELECT count(*), sum(lines) FROM files").fetchone()
    finally:
        db.close()
    return repos, files, lines or 0


def time_calls(base: str, repo: str, calls: int) -> tuple[list[float], list[float]]:
    """Milliseconds of ``calls`` POST /search and ``calls`` MCP search_code tool calls (one MCP
    session), interleaved question by question so load drift hits both alike; one warm-up each."""
    search: list[float] = []
    mcp: list[float] = []

    async def run() -> None:
        async with (
            httpx.AsyncClient(timeout=600) as plain,
            httpx2.AsyncClient(timeout=600) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client,
        ):
            for i in range(calls + 1):
                args = {"query": QUESTIONS[i % len(QUESTIONS)], "repo": repo, "top_k": 10}
                t = time.perf_counter()
                r = await plain.post(f"{base}/search", json=args)
                ms = (time.perf_counter() - t) * 1000
                r.raise_for_status()
                t = time.perf_counter()
                result = await client.call_tool("search_code", args)
                ms_mcp = (time.perf_counter() - t) * 1000
                if result.is_error:
                    raise SystemExit(f"search_code failed: {result.content}")
                if i:
                    search.append(ms)
                    mcp.append(ms_mcp)

    anyio.run(run)
    return search, mcp


def time_metrics(base: str, calls: int) -> tuple[list[float], int]:
    """Milliseconds of ``calls`` GET /metrics after one warm-up, and the body's size in bytes."""
    out, size = [], 0
    with httpx.Client(timeout=600) as http:
        for i in range(calls + 1):
            t = time.perf_counter()
            r = http.get(f"{base}/metrics")
            ms = (time.perf_counter() - t) * 1000
            r.raise_for_status()
            size = len(r.content)
            if i:
                out.append(ms)
    return out, size


def row(name: str, values: list[float]) -> str:
    """A markdown row: name, calls, p50, p95, mean."""
    return (
        f"| {name} | {len(values)} | {statistics.median(values):.0f} ms | "
        f"{pct(values, 0.95):.0f} ms | {statistics.fmean(values):.0f} ms |"
    )


def main() -> int:
    """Copy the index, start the server, time the three calls, print the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=HERE / ".cache" / "data-test")
    p.add_argument("--repo", default="marshmallow")
    p.add_argument("--calls", type=int, default=20)
    args = p.parse_args()
    if not (args.data / "coderag.db").exists():
        raise SystemExit(f"no index at {args.data}: run bench/retrieval.py --split test first")
    work = Path(tempfile.mkdtemp(prefix="coderag-surface-"))
    try:
        data = work / "data"
        shutil.copytree(args.data, data)
        repos, files, lines = indexed_lines(data)
        load_before = os.getloadavg()
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        proc = start_server(data, port)
        try:
            with httpx.Client(base_url=base, timeout=10) as client:
                wait_up(client, proc)
            search, mcp = time_calls(base, args.repo, args.calls)
            metrics, size = time_metrics(base, args.calls)
        finally:
            proc.terminate()
            proc.wait(30)
        load_after = os.getloadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"index: {repos} repositories, {files} files, {lines} lines (a copy of {args.data}); "
        f"questions on {args.repo}; load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after ({os.cpu_count()} CPUs)\n"
    )
    print("| call | n | p50 | p95 | mean |\n| --- | --- | --- | --- | --- |")
    print(row("`POST /search` (httpx)", search))
    print(row("MCP `search_code` (SDK client, streamable HTTP)", mcp))
    print(row(f"`GET /metrics` ({size} bytes)", metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
