"""Evidence lines that answer (issue 31, lever 6): do an answer's quoted ranges hold the line
that does what the question asks, when that line is deep inside the unit?

    python -m bench.evidence_lines --set tune [--grid]     # tuning: pick the space and weight
    python -m bench.evidence_lines --set test               # the frozen set, read once

Questions: ``bench/questions/evidence/<set>.jsonl``, each with the enclosing unit and the 1–3
answer lines, written without reading the generator. Each question's unit is the parser's unit
holding the answer lines (so the ranking is out of the measure); its quotes are the extractive
answer's (``evidence.quotes``) without a focus (today) and with the retriever's (``focus``).
A question is answered when a quoted range overlaps its answer lines.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench.fetch import corpus_root  # noqa: E402
from coderag.schemas import Hit, Unit  # noqa: E402
from coderag.settings import get_settings  # noqa: E402
from coderag_embedder.queries import local  # noqa: E402
from coderag_generator.evidence import intents, quotes  # noqa: E402
from coderag_parser.languages import language_of  # noqa: E402
from coderag_parser.units import parse_source  # noqa: E402
from coderag_retriever import focus  # noqa: E402
from coderag_retriever.query import Query  # noqa: E402
from coderag_retriever.retrieval import to_hit  # noqa: E402
from coderag_retriever.search import Ranked  # noqa: E402

WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, 1.0)
"""Weights of one question word tried with ``--grid`` (1.0: words first, cosine breaks ties)."""

TARGET_WEIGHTS = (0.0, 0.05, 0.1)
"""Weights of one question word in what a statement assigns, tried with ``--grid``."""


def load(name: str) -> list[dict]:
    """The questions of one set."""
    path = HERE / "questions" / "evidence" / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def asked(q: dict) -> Query:
    """The question as the retriever parses it (the shipped settings' Chinese vocabularies)."""
    s = get_settings()
    return Query(q["corpus"], q["query"], s.zh_vocab, s.zh_dictionary)


def unit_of(q: dict) -> Unit | None:
    """The smallest parser unit of the question's file that holds its answer lines."""
    want = q["lines"]
    rel = want["file"]
    path = corpus_root(q["corpus"]) / rel
    language = language_of(rel)
    if language is None or not path.exists():
        return None
    source = path.read_text("utf-8", errors="replace")
    units = parse_source(q["corpus"], rel, language, source).units
    holding = [
        u for u in units if u.start_line <= want["start_line"] and want["end_line"] <= u.end_line
    ]
    return min(holding, key=lambda u: u.end_line - u.start_line, default=None)


def hit_of(u: Unit) -> Hit:
    """The unit as /retrieve sends it (its doc comment too)."""
    hit = to_hit(Ranked(unit=u, score=1.0, routes={}, similarity=None), with_code=True)
    return hit.model_copy(update={"doc": u.doc})


def answered(hit: Hit, q: dict) -> tuple[bool, int]:
    """Whether a quote of the hit overlaps the answer lines, and how many lines are quoted."""
    want = q["lines"]
    cited = quotes(hit, q["query"], intents(q["query"]))
    ok = any(c.start_line <= want["end_line"] and want["start_line"] <= c.end_line for c in cited)
    return ok, sum(c.end_line - c.start_line + 1 for c in cited)


def focused(hit: Hit, q: dict, vectors: np.ndarray | None, weight: float, target: float) -> Hit:
    """The hit with the focus ``focus.best`` picks under one space's vectors and weights."""
    lines = (hit.text or "").splitlines()[: hit.end_line - hit.start_line + 1]
    terms = set(asked(q).tokens)
    found = focus.candidates(terms, lines)
    cosines = None if vectors is None else vectors[1:] @ vectors[0]
    s = focus.best(terms, found, cosines, weight, target)
    if s is None:
        return hit
    return hit.model_copy(
        update={"focus_start": hit.start_line + s.first, "focus_end": hit.start_line + s.last}
    )


def main() -> int:
    """Report today's quotes against the focused ones, per language."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", required=True, choices=("tune", "test"))
    ap.add_argument("--grid", action="store_true", help="every space and weight (tuning only)")
    args = ap.parse_args()
    if args.grid and args.set != "tune":
        ap.error("--grid tunes: run it on the tuning set only")
    embedder = local()
    spaces = embedder.spaces()
    rows = []
    for q in load(args.set):
        u = unit_of(q)
        if u is None:
            print(f"{q['id']}: no unit holds the answer lines", file=sys.stderr)
            continue
        hit = hit_of(u)
        lines = (hit.text or "").splitlines()[: hit.end_line - hit.start_line + 1]
        terms = set(asked(q).tokens)
        texts = [q["query"], *(s.text for s in focus.candidates(terms, lines))]
        vectors = {s: embedder.embed_queries(s, texts) if len(texts) > 1 else None for s in spaces}
        rows.append((q, hit, vectors))
    variants: list[tuple[str, str | None, float, float]] = [("today", None, -1.0, 0.0)]
    if args.grid:
        variants += [
            (f"{s or 'words only'}, {w}, {t}", s, w, t)
            for s in (None, *spaces)
            for w in WEIGHTS
            for t in TARGET_WEIGHTS
            if s or w > 0
        ]
    else:
        w, t = focus.TERM_WEIGHT, focus.TARGET_WEIGHT
        variants += [(f"shipped: {focus.SPACE}, {w}, {t}", focus.SPACE, w, t)]
    print("| space, word weight, target weight | n | answered | en | zh | lines quoted |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, space, weight, target in variants:
        per: dict[str, list[bool]] = defaultdict(list)
        quoted = []
        for q, hit, vectors in rows:
            vecs = vectors.get(space) if space else None
            h = hit if weight < 0 else focused(hit, q, vecs, weight, target)
            ok, n = answered(h, q)
            per["all"].append(ok)
            per[q["lang"]].append(ok)
            quoted.append(n)

        def share(xs: list[bool]) -> str:
            return f"{sum(xs) / len(xs):.2f} ({sum(xs)}/{len(xs)})" if xs else "–"

        print(
            f"| {label} | {len(per['all'])} | {share(per['all'])} | {share(per['en'])} | "
            f"{share(per['zh'])} | {sum(quoted) / max(len(quoted), 1):.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
