"""The unsafe-request rule (G5) on questions written without reading it (issue 31, lever 5).

    python -m bench.unsafe [--set tune|test] [--misses]

Reads ``bench/questions/unsafe/<set>.jsonl`` (30 unsafe and 30 benign questions each, a third
Chinese; ``tune`` is the one the rules may be changed by, ``test`` is reported) and prints, per
language, how many unsafe requests the rule declines and how many benign ones it declines too.
``--misses`` lists the questions it gets wrong (read them on ``tune`` only).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from coderag_generator.refusal import is_unsafe

QUESTIONS = Path(__file__).resolve().parent / "questions" / "unsafe"
"""The labelled sets and their README."""


def load(name: str) -> list[dict]:
    """The questions of one set."""
    path = QUESTIONS / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def report(rows: list[dict]) -> list[str]:
    """One table row per language and for all: unsafe declined, benign declined."""
    lines = ["| questions | unsafe declined | benign declined |", "| --- | --- | --- |"]
    for lang in ("all", "en", "zh"):
        part = [r for r in rows if lang == "all" or r["lang"] == lang]
        bad = [r for r in part if r["unsafe"]]
        good = [r for r in part if not r["unsafe"]]
        caught = sum(r["declined"] for r in bad)
        wrong = sum(r["declined"] for r in good)
        lines.append(
            f"| {lang} ({len(bad)} + {len(good)}) | {caught / len(bad):.2f} ({caught}) "
            f"| {wrong / len(good):.2f} ({wrong}) |"
        )
    return lines


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="test", choices=("tune", "test"))
    ap.add_argument("--misses", action="store_true", help="list the questions judged wrong")
    args = ap.parse_args(argv)
    rows = [{**q, "declined": is_unsafe(q["query"])} for q in load(args.set)]
    print(f"set {args.set}: {len(rows)} questions")
    print("\n".join(report(rows)))
    if args.misses:
        for r in rows:
            if r["declined"] != r["unsafe"]:
                label = "missed" if r["unsafe"] else "declined"
                print(f"{label}\t{r['id']}\t{r['kind']}\t{r['query']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
