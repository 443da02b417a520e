"""Does the same question rank the same way in another process? Every written question of a
split is searched in two processes with different string-hash seeds, and their rankings compared.

    python -m bench.determinism [--split test|tune] [--search-ef N]

Prints how many questions got a different ranking (ids or scores to five decimals) and how many a
different first hit. ``--search-ef`` sets the HNSW candidates per vector query in both processes
(it is written into the data directory's collections: run again without it to restore).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEEDS = (7, 14)
"""PYTHONHASHSEED of the two processes."""


def dump(split: str, out: Path) -> None:
    """Write every written question's ranking (unit id, score) to ``out`` as JSON."""
    from bench.fetch import load_corpora
    from bench.retrieval import K, load_questions
    from coderag.settings import get_settings
    from coderag_retriever.search import rank

    settings = get_settings()
    got = {}
    for corpus in load_corpora():
        if corpus.get("split", "tune") != split:
            continue
        for q in load_questions(corpus["name"]):
            if q["type"] != "absent":
                hits = rank(corpus["name"], q["query"], K, settings)
                got[q["id"]] = [(h.unit.id, round(h.score, 5)) for h in hits]
    out.write_text(json.dumps(got), "utf-8")


def main() -> int:
    """Run the two processes and compare."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--split", default="test", choices=("tune", "test"))
    ap.add_argument("--search-ef", type=int)
    ap.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.search_ef:  # both processes read it as their setting
        os.environ["CODERAG_VECTOR_SEARCH_EF"] = str(args.search_ef)
    if args.dump:
        dump(args.split, args.dump)
        return 0
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in SEEDS:
            out = Path(tmp) / f"{seed}.json"
            cmd = [
                sys.executable,
                "-m",
                "bench.determinism",
                "--split",
                args.split,
                "--dump",
                str(out),
            ]
            subprocess.run(cmd, env={**os.environ, "PYTHONHASHSEED": str(seed)}, check=True)
            runs.append(json.loads(out.read_text("utf-8")))
    a, b = runs
    differ = [k for k in a if a[k] != b[k]]
    first = [k for k in differ if a[k][:1] and b[k][:1] and a[k][0][0] != b[k][0][0]]
    print(
        f"split {args.split}: {len(differ)} of {len(a)} questions ranked differently in a second "
        f"process, {len(first)} with another first hit"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
