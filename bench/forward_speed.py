"""One forward of each shipped encoder, eager against its traced graph, on one thread.

    python -m bench.forward_speed [--lengths 24 130 256] [--repeats 20]

For each encoder of the defaults (int8 on CPU) and each input length: the largest difference
between the two outputs (0.0: the same bits) and the mean milliseconds of a forward of one
text, eager and traced. Run it on a quiet machine; it prints the load average.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from coderag_embedder.encoder import get_encoders


def mean_ms(forward: Callable[..., Any], ids: Any, mask: Any, repeats: int) -> float:
    """Mean milliseconds of ``forward(ids, mask)`` over ``repeats`` calls, after three warm-up
    calls."""
    for _ in range(3):
        forward(ids, mask)
    t = time.perf_counter()
    for _ in range(repeats):
        forward(ids, mask)
    return (time.perf_counter() - t) / repeats * 1000


def main() -> int:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[24, 130, 256])
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    encoders = get_encoders()
    torch.set_num_threads(1)
    print("| encoder | tokens | max difference | eager ms | traced ms |")
    print("| --- | --- | --- | --- | --- |")
    for space, enc in encoders.items():
        graph = enc.forward.graph
        if graph is None:
            raise SystemExit(f"{space}: no traced graph (not on CPU?)")

        def eager(ids: Any, mask: Any, model: Any = enc.model) -> Any:
            return model(input_ids=ids, attention_mask=mask).last_hidden_state

        for n in args.lengths:
            ids = torch.randint(1000, 5000, (1, n))
            mask = torch.ones_like(ids)
            with torch.inference_mode():
                diff = float((eager(ids, mask) - graph(ids, mask)).abs().max())
                e = mean_ms(eager, ids, mask, args.repeats)
                t = mean_ms(graph, ids, mask, args.repeats)
            print(f"| {space} ({enc.name}) | {n} | {diff} | {e:.1f} | {t:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
