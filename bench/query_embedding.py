"""What the embedder seam costs a query: both query vectors (``vector`` and ``vector2``) from the
embedder's functions in-process against the same through ``POST /embed`` to the embedder app on
a loopback port (uvicorn in a thread, as ``coderag serve --service embedder`` runs it).

    python -m bench.query_embedding [--rounds 20]

Prints p50/p95 in milliseconds per path as a markdown table (one warm-up round not counted).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("CODERAG_DATA_DIR", str(Path(tempfile.mkdtemp(prefix="coderag-qe-"))))

import uvicorn  # noqa: E402

from bench.compose_search import QUERIES, percentile  # noqa: E402
from coderag.embedding import HttpEmbedder, QueryEmbedder  # noqa: E402
from coderag_app.server import create_app  # noqa: E402
from coderag_embedder.queries import local  # noqa: E402


def measure(paths: dict[str, QueryEmbedder], rounds: int) -> dict[str, list[float]]:
    """Milliseconds to embed each query in every space per path, after one warm-up round; the
    paths take turns query by query, so a change in the machine's load hits both alike."""
    times: dict[str, list[float]] = {name: [] for name in paths}
    for round_ in range(rounds + 1):
        for query in QUERIES:
            for name, embedder in paths.items():
                t = time.perf_counter()
                for space in embedder.spaces():
                    embedder.embed_queries(space, [query])
                if round_:
                    times[name].append((time.perf_counter() - t) * 1000)
    return times


def main() -> int:
    """Time both paths and print the table."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    app = create_app(("coderag_embedder",))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    paths = {
        "in-process": local(),
        "HTTP /embed (loopback)": HttpEmbedder.connect(f"http://127.0.0.1:{port}"),
    }
    results = measure(paths, args.rounds)
    server.should_exit = True
    thread.join(30)
    print(f"| path | queries | p50 ms | p95 ms |  (spaces: {', '.join(local().spaces())})")
    print("| --- | --- | --- | --- |")
    for name, times in results.items():
        p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
        print(f"| {name} | {len(times)} | {p50:.1f} | {p95:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
