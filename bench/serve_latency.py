"""/search and /ask latency over the benchmark questions, through the real all-in-one app
in-process (FastAPI TestClient: ASGI, no socket), with the cross-encoder on and off in one run.

    CODERAG_DATA_DIR=bench/.cache/data python -m bench.serve_latency [--split test] [--rounds 1]

Uses the indexes ``bench/rerank_data.py`` or ``bench/retrieval.py`` left (nothing is indexed
here). Prints the load average before each configuration, then p50 / p95 in milliseconds per
route and question language, after one warm-up question per corpus; and how often /search and
/ask agree on the first hit. Time only on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("CODERAG_DATA_DIR", str(HERE / ".cache" / "data"))

from fastapi.testclient import TestClient  # noqa: E402

from bench.fetch import load_corpora  # noqa: E402
from bench.retrieval import load_questions  # noqa: E402
from coderag.settings import get_settings  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    """The p-th percentile (nearest rank)."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))]


def run(split: str, rounds: int, rerank: str) -> str:
    """Time every question of the split's corpora under one ``CODERAG_RERANK_MODEL``."""
    os.environ["CODERAG_RERANK_MODEL"] = rerank
    get_settings.cache_clear()
    from coderag_app.server import create_app

    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    agree = total = 0
    load = os.getloadavg()[0]
    with TestClient(create_app(), base_url="http://127.0.0.1") as client:  # an allowed host
        for corpus in load_corpora():
            if corpus.get("split") != split:
                continue
            name = corpus["name"]
            questions = load_questions(name)
            client.post("/search", json={"query": "warm up", "repo": name, "top_k": 10})
            client.post("/ask", json={"query": "warm up", "repo": name})
            for _ in range(rounds):
                for q in questions:
                    t = time.perf_counter()
                    s = client.post(
                        "/search", json={"query": q["query"], "repo": name, "top_k": 10}
                    )
                    times[("search", q["lang"])].append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    a = client.post("/ask", json={"query": q["query"], "repo": name})
                    times[("ask", q["lang"])].append((time.perf_counter() - t) * 1000)
                    if s.status_code != 200 or a.status_code != 200:
                        raise SystemExit(f"{name}: {s.status_code} {a.status_code} {a.text[:200]}")
                    hits, cites = s.json()["results"], a.json().get("citations") or []
                    if hits and cites and not a.json().get("refused"):
                        total += 1
                        first = (hits[0]["file"], hits[0]["start_line"])
                        agree += any((c["file"], c["start_line"]) == first for c in cites[:1])
    rows = [f"CODERAG_RERANK_MODEL={rerank!r}, load average before {load:.2f}", ""]
    rows += ["| route | language | n | p50 ms | p95 ms |", "| --- | --- | --- | --- | --- |"]
    for (route, lang), xs in sorted(times.items()):
        rows.append(
            f"| {route} | {lang} | {len(xs)} | {statistics.median(xs):.0f} | {pct(xs, 0.95):.0f} |"
        )
    rows.append(f"\n/ask's first citation is /search's first hit: {agree} of {total}\n")
    return "\n".join(rows)


def main() -> int:
    """Time the split with the cross-encoder on, then off."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="test")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--models", nargs="+", default=["coderag", ""])
    args = ap.parse_args()
    for model in args.models:
        print(run(args.split, args.rounds, model), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
