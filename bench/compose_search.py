"""/search latency through the compose gateway against the all-in-one server, on the same
repository (each server has indexed it): the cost of the extra hops.

    python -m bench.compose_search --url gateway=http://127.0.0.1:18080 \
        --url all-in-one=http://127.0.0.1:18000 --repo alpha [--rounds 20]

Each round sends every query once to each server in turn (warm-up round not counted), and the
report gives p50/p95 in milliseconds per server as a markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx

QUERIES = (
    "order service create",
    "where are items validated",
    "how is an order audited",
    "save user items",
    "base service constructor",
    "订单是如何创建的",
)
"""Questions of the fixture repository's code (tests/fixtures), one in Chinese."""


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values, by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def measure(client: httpx.Client, repo: str, rounds: int) -> list[float]:
    """Milliseconds of each /search, after one warm-up round."""
    times = []
    for round_ in range(rounds + 1):
        for query in QUERIES:
            start = time.perf_counter()
            r = client.post("/search", json={"query": query, "repo": repo, "top_k": 10})
            r.raise_for_status()
            if round_:
                times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    """Print the latency table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", action="append", required=True, help="NAME=BASE_URL")
    p.add_argument("--repo", required=True)
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    print("| server | requests | p50 ms | p95 ms | mean ms |")
    print("| --- | --- | --- | --- | --- |")
    for spec in args.url:
        name, _, base = spec.partition("=")
        with httpx.Client(base_url=base, timeout=60) as client:
            t = measure(client, args.repo, args.rounds)
        print(
            f"| {name} | {len(t)} | {percentile(t, 0.5):.1f} | {percentile(t, 0.95):.1f} "
            f"| {statistics.fmean(t):.1f} |"
        )


if __name__ == "__main__":
    main()
