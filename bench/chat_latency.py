"""Latency of the OpenAI-compatible chat route against /ask, in one run, through a real
``coderag serve`` on loopback and the official ``openai`` client (issue 33).

    CODERAG_DATA_DIR=bench/.cache/data python -m bench.chat_latency [--split test] [--limit 60]

Uses the indexes ``bench/rerank_data.py`` or ``bench/retrieval.py`` left (nothing is indexed
here). For each question of the split's corpora, in turn: ``POST /ask`` (the baseline), a
streamed chat completion (time to the first chunk with text, and to ``[DONE]``) and a whole one.
Prints the load average before and after, then p50 / p95 in milliseconds. Time only on a quiet
machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from openai import OpenAI

HERE = Path(__file__).resolve().parent
os.environ.setdefault("CODERAG_DATA_DIR", str(HERE / ".cache" / "data"))

from bench.fetch import load_corpora  # noqa: E402
from bench.index_speed import free_port  # noqa: E402
from bench.retrieval import load_questions  # noqa: E402
from bench.serve_latency import pct  # noqa: E402

TOKEN = "bench-token"
"""The one admin token the server is started with."""


def serve(port: int) -> subprocess.Popen[bytes]:
    """``coderag serve`` on loopback with one token, once /health answers."""
    env = {**os.environ, "CODERAG_API_TOKENS": f"bench:{TOKEN}:admin"}
    exe = Path(sys.executable).with_name("coderag")
    proc = subprocess.Popen(
        [str(exe), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("coderag serve did not answer /health within 180 s")


def main() -> int:
    """Time /ask, streamed chat and whole chat over the split's questions."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=60, help="questions per corpus at most")
    args = ap.parse_args()
    port = free_port()
    proc = serve(port)
    base = f"http://127.0.0.1:{port}"
    client = OpenAI(base_url=f"{base}/v1", api_key=TOKEN, max_retries=0, timeout=120)
    http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
    times: dict[str, list[float]] = {"ask": [], "chat first chunk": [], "chat streamed": []}
    times["chat whole"] = []
    before = os.getloadavg()[0]
    try:
        for corpus in load_corpora():
            if corpus.get("split") != args.split:
                continue
            name = corpus["name"]
            model = f"coderag/{name}"
            http.post("/ask", json={"query": "warm up", "repo": name})
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "warm up"}]
            )
            for q in load_questions(name)[: args.limit]:
                messages = [{"role": "user", "content": q["query"]}]
                t = time.perf_counter()
                r = http.post("/ask", json={"query": q["query"], "repo": name})
                times["ask"].append((time.perf_counter() - t) * 1000)
                if r.status_code != 200:
                    raise SystemExit(f"{name}: /ask {r.status_code} {r.text[:200]}")
                t = time.perf_counter()
                first = None
                for chunk in client.chat.completions.create(
                    model=model,
                    messages=messages,
                    stream=True,  # type: ignore[arg-type]
                ):
                    if first is None and chunk.choices and chunk.choices[0].delta.content:
                        first = (time.perf_counter() - t) * 1000
                times["chat streamed"].append((time.perf_counter() - t) * 1000)
                times["chat first chunk"].append(first if first is not None else float("nan"))
                t = time.perf_counter()
                client.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
                times["chat whole"].append((time.perf_counter() - t) * 1000)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    after = os.getloadavg()[0]
    print(f"split {args.split}; load average before {before:.2f}, after {after:.2f}\n")
    print("| what | n | p50 ms | p95 ms |\n| --- | --- | --- | --- |")
    for what, xs in times.items():
        xs = [x for x in xs if x == x]
        print(f"| {what} | {len(xs)} | {statistics.median(xs):.0f} | {pct(xs, 0.95):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
