"""Encoder throughput: units per second of each configured encoder at several unit lengths, on
real code (pygments' Python lexer source, bench/history.json), one process, all cores.

    python -m bench.encoders [--units 16]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from bench.fetch import fetch  # noqa: E402
from coderag_embedder.encoder import get_encoders  # noqa: E402

LENGTHS = (3000, 1500, 750)
"""Characters per unit measured (3000 characters of lexer code are about 1000 e5 tokens)."""


def main() -> int:
    """Print a markdown table of units/s per encoder and length."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--units", type=int, default=16)
    args = ap.parse_args()
    root = fetch(json.loads((HERE / "history.json").read_text())[0])
    text = (root / "pygments" / "lexers" / "python.py").read_text("utf-8")
    encoders = get_encoders()
    names = {space: enc.name for space, enc in encoders.items()}
    print(
        "| characters per unit | "
        + " | ".join(f"{s} ({n}) units/s" for s, n in names.items())
        + " |"
    )
    print("| --- |" + " --- |" * len(encoders))
    for n in LENGTHS:
        units = [text[i * n : (i + 1) * n] for i in range(args.units)]
        cells = []
        for enc in encoders.values():
            enc.encode(units[:2])  # warm-up
            t = time.perf_counter()
            enc.encode(units)
            cells.append(f"{len(units) / (time.perf_counter() - t):.1f}")
        print(f"| {n} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
