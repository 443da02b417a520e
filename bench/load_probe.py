"""The load probe of issue 45's finding 4: how long ``/health`` takes on a real server while
clients send it 25 MiB unsigned webhooks and 1 MiB unauthenticated API bodies in a loop.

    python -m bench.load_probe [--seconds 60] [--senders 2]

One ``coderag serve`` with API tokens and a webhook secret (no repository: the probe is about
the event loop, not the index). ``/health`` is polled from this process every 50 ms, first
with nothing else arriving (the baseline, in the same run), then while ``--senders`` processes
each post, in turn, a 25 MiB push payload with a wrong signature to ``/webhooks/github`` and a
1 MiB JSON body without a token to ``/search``. Prints p50, p95, p99 and the worst wait of each
phase, how many hostile bodies were answered (and that every answer was a 401), and the load
average before the run. Measure on a quiet machine: nothing else running.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

from harness.serve import serving

TOKENS = "root:probe-admin-token:admin"
"""The server's only token: the probe's hostile bodies carry none or a wrong signature."""

PUSH_BYTES = 25 << 20
"""Size of the unsigned webhook body."""

API_BYTES = 1 << 20
"""Size of the unauthenticated API body."""


def push_body() -> bytes:
    """A GitHub push payload just under ``PUSH_BYTES``: millions of small lists, slow to walk
    for a server that parsed it before checking its signature."""
    item = len(json.dumps([[1, 2], [1, 2]])) - len(json.dumps([[1, 2]]))
    lists = (PUSH_BYTES - 64) // item
    return json.dumps({"ref": "refs/heads/main", "commits": [[1, 2]] * lists}).encode()


def api_body() -> bytes:
    """A search request padded to just under ``API_BYTES``."""
    item = len(json.dumps([0, 0])) - len(json.dumps([0]))
    return json.dumps({"query": "q", "repo": "x", "pad": [0] * ((API_BYTES - 64) // item)}).encode()


def send(base: str, stop_at: float, counts: mp.Queue) -> None:
    """Post hostile bodies in a loop until ``stop_at`` (``time.time()``); put (answered,
    statuses) on ``counts``."""
    statuses: dict[int, int] = {}
    try:
        _send_until(base, stop_at, statuses)
    finally:  # a sender that failed still reports, with what it got
        counts.put(statuses)


def _send_until(base: str, stop_at: float, statuses: dict[int, int]) -> None:
    push, api = push_body(), api_body()
    with httpx.Client(base_url=base, timeout=120) as http:
        while time.time() < stop_at:
            for path, body, headers in (
                (
                    "/webhooks/github",
                    push,
                    {"X-Hub-Signature-256": "sha256=" + "0" * 64, "X-GitHub-Event": "push"},
                ),
                ("/search", api, {"Content-Type": "application/json"}),
            ):
                code = http.post(path, content=body, headers=headers).status_code
                statuses[code] = statuses.get(code, 0) + 1


def poll(base: str, seconds: float) -> list[float]:
    """``/health``'s wall times in seconds, polled every 50 ms for ``seconds``."""
    waits: list[float] = []
    with httpx.Client(base_url=base, timeout=30) as http:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            r = http.get("/health")
            waits.append(time.perf_counter() - start)
            if r.status_code != 200:
                raise SystemExit(f"/health answered {r.status_code}: {r.text[:300]}")
            time.sleep(0.05)
    return waits


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def row(name: str, waits: list[float], sent: str) -> str:
    """One Markdown table row of a phase."""
    ms = [w * 1000 for w in waits]
    return (
        f"| {name} | {len(ms)} | {percentile(ms, 0.5):.1f} | {percentile(ms, 0.95):.1f} | "
        f"{percentile(ms, 0.99):.1f} | {max(ms):.1f} | {sent} |"
    )


def main(argv: list[str]) -> int:
    """Start the server, poll it quiet, poll it under load, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--senders", type=int, default=2)
    args = ap.parse_args(argv)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="coderag-probe-") as tmp:
        data = Path(tmp) / "data"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CODERAG_")}
        env.update(
            CODERAG_DATA_DIR=str(data),
            CODERAG_API_TOKENS=TOKENS,
            CODERAG_WEBHOOK_SECRET="probe-webhook-secret",
        )
        with serving(env, log=Path(tmp) / "serve.log") as server:
            poll(server.base, 3)  # the first answers load the health checks
            quiet = poll(server.base, args.seconds)
            counts: mp.Queue = mp.Queue()
            stop_at = time.time() + args.seconds + 2
            senders = [
                mp.Process(target=send, args=(server.base, stop_at, counts))
                for _ in range(args.senders)
            ]
            for p in senders:
                p.start()
            time.sleep(1)  # the senders build their bodies first
            loaded = poll(server.base, args.seconds)
            statuses: dict[int, int] = {}
            for p in senders:
                for code, n in counts.get(timeout=300).items():
                    statuses[code] = statuses.get(code, 0) + n
                p.join(60)
    sent = ", ".join(f"{n} answered {code}" for code, n in sorted(statuses.items()))
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; cpus {os.cpu_count()}")
    print("| phase | polls | p50 ms | p95 ms | p99 ms | max ms | hostile bodies |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(row("quiet", quiet, "none"))
    print(row(f"{args.senders} senders", loaded, sent))
    command = f"python -m bench.load_probe --seconds {args.seconds:g} --senders {args.senders}"
    print(f"command: {command}")
    return 0 if set(statuses) == {401} else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
