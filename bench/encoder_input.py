"""What the encoder should read (E2): the vector route alone, ranked by cosine, under each input
built from a unit, on the pinned corpora's written questions.

    python -m bench.encoder_input [--split test|tune] [--space vector|vector2]

Inputs compared: ``shipped`` (what the embedder reads today: language, kind and name, the doc
comment, the code), ``code`` (the code alone), ``facts`` (seed 004's input: the parser's
signature JSON and its semantic facts, no body; units without facts keep the shipped input) and
``facts+code`` (the facts JSON, then the shipped input). Each unit's vector comes from the data
directory's content-hash cache or is encoded and cached there, so a rerun encodes nothing. The
corpora must be indexed in ``CODERAG_DATA_DIR`` already (``bench/retrieval.py --reuse`` does it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent

import numpy as np  # noqa: E402

from bench.fetch import load_corpora  # noqa: E402
from bench.retrieval import K, first_rank, load_questions  # noqa: E402
from coderag.schemas import Unit  # noqa: E402
from coderag.store import get_catalog  # noqa: E402
from coderag_embedder import cache  # noqa: E402
from coderag_embedder.encoder import Encoder, get_encoders, text_key, unit_text  # noqa: E402


def facts_json(unit: Unit) -> str:
    """The parser's facts as seed 004 writes them: the signature JSON first, then each semantic
    fact, as compact JSON."""
    facts = dict(unit.facts)
    signature = facts.pop("signature", None)
    parts = [json.dumps(signature, ensure_ascii=False)] if signature else []
    parts += [json.dumps({k: v}, ensure_ascii=False) for k, v in sorted(facts.items())]
    return "\n".join(parts)


INPUTS: dict[str, Callable[[Unit], str]] = {
    "shipped": unit_text,
    "code": lambda u: u.text,
    "facts": lambda u: facts_json(u) or unit_text(u),
    "facts+code": lambda u: "\n".join(p for p in (facts_json(u), unit_text(u)) if p),
}
"""Encoder inputs compared, by name."""


def vectors(units: list[Unit], build: Callable[[Unit], str], encoder: Encoder) -> np.ndarray:
    """One vector per unit under an input, from the cache or encoded (and cached)."""
    catalog = get_catalog()
    keys = [text_key(build(u)) for u in units]
    known = cache.lookup(catalog, encoder.name, keys)
    todo = {k: build(u) for k, u in zip(keys, units, strict=True) if k not in known}
    if todo:
        t = time.perf_counter()
        fresh = encoder.encode(list(todo.values()))
        new = dict(zip(todo, fresh, strict=True))
        cache.store(catalog, encoder.name, new)
        known.update(new)
        print(f"  encoded {len(todo)} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return np.stack([known[k] for k in keys])


def metrics(ranks: list[int | None]) -> str:
    """R@1 / R@5 / MRR@10 of first-hit ranks."""
    n = len(ranks) or 1
    r1 = sum(r == 1 for r in ranks) / n
    r5 = sum(r is not None and r <= 5 for r in ranks) / n
    mrr = sum(1 / r for r in ranks if r is not None and r <= K) / n
    return f"{r1:.2f} / {r5:.2f} / {mrr:.2f}"


def main() -> int:
    """Print one markdown row per input: all questions, by question language, per corpus."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--split", default="tune", choices=("tune", "test"))
    ap.add_argument("--space", default="vector", choices=("vector", "vector2"))
    args = ap.parse_args()
    encoder = get_encoders()[args.space]
    corpora = [c for c in load_corpora() if c.get("split", "tune") == args.split]
    stats: dict[str, dict[str, list[int | None]]] = defaultdict(lambda: defaultdict(list))
    for corpus in corpora:
        name = corpus["name"]
        units = get_catalog().units(name)
        if not units:
            print(f"{name}: not indexed in this data directory, skipped", file=sys.stderr)
            continue
        questions = [q for q in load_questions(name) if q["type"] != "absent"]
        spans = [(u.file, u.start_line, u.end_line) for u in units]
        queries = encoder.encode_query([q["query"] for q in questions])
        for label, build in INPUTS.items():
            print(f"{name} / {label}: {len(units)} units", file=sys.stderr, flush=True)
            scores = vectors(units, build, encoder) @ queries.T
            for j, q in enumerate(questions):
                top = [spans[i] for i in np.argsort(-scores[:, j], kind="stable")[:K]]
                r = first_rank(top, q["gold"])
                for group in ("all", q["lang"], q["type"], name):
                    stats[label][group].append(r)
    groups = ["all", "en", "zh", "descriptive", "chain", *(c["name"] for c in corpora)]
    groups = [g for g in groups if g in stats["shipped"]]
    print(f"{args.space} ({encoder.name}) alone, split {args.split}, R@1 / R@5 / MRR@10\n")
    print("| input | " + " | ".join(f"{g} (n={len(stats['shipped'][g])})" for g in groups) + " |")
    print("| --- |" + " --- |" * len(groups))
    for label in INPUTS:
        print(f"| {label} | " + " | ".join(metrics(stats[label][g]) for g in groups) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
