"""Load for the fault bench: concurrent clients on /search and /ask against a real server, with
each request's latency and every failure counted by its cause."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

QUESTIONS = (
    "how does the router match a URL pattern to a handler",
    "where is the middleware stack built",
    "how are URL parameters read from the request context",
    "怎么给路由注册中间件？",
)
"""Questions about the chi corpus (the served repository), English and Chinese, in turn."""

KINDS = ("search", "ask")
"""Endpoints each client calls, one after the other."""


@dataclass
class Tally:
    """Latencies (ms) of one endpoint's requests and the causes of its failures."""

    ms: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile latency (nearest rank), NaN without requests."""
        if not self.ms:
            return float("nan")
        ranked = sorted(self.ms)
        return ranked[min(len(ranked) - 1, max(0, round(q / 100 * len(ranked)) - 1))]


async def _client(base: str, repo: str, i: int, stop_at: float, tallies: dict[str, Tally]) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=300) as c:
        turn = i
        while time.monotonic() < stop_at:
            query = QUESTIONS[turn % len(QUESTIONS)]
            turn += 1
            for kind in KINDS:
                t = time.perf_counter()
                try:
                    r = await c.post(f"/{kind}", json={"query": query, "repo": repo})
                    failure = None if r.status_code == 200 else f"HTTP {r.status_code}"
                except httpx.HTTPError as exc:
                    failure = type(exc).__name__
                tallies[kind].ms.append((time.perf_counter() - t) * 1000)
                if failure:
                    tallies[kind].failures[failure] += 1


def run_load(base: str, repo: str, clients: int, seconds: float) -> dict[str, Tally]:
    """``clients`` concurrent loops of /search then /ask on ``repo`` for ``seconds`` (requests
    under way when the time is up finish and count)."""
    tallies = {kind: Tally() for kind in KINDS}
    stop_at = time.monotonic() + seconds

    async def all_clients() -> None:
        await asyncio.gather(*(_client(base, repo, i, stop_at, tallies) for i in range(clients)))

    asyncio.run(all_clients())
    return tallies
