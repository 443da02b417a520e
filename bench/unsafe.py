"""The unsafe-request rule (G5) on questions written without reading it (issue 31, lever 5).

    python -m bench.unsafe [--set tune|test|test2|train|train2..train5|ordinary] [--misses]
    python -m bench.unsafe --set harmless --learned OLD.json --learned NEW.json

Reads ``bench/questions/unsafe/<set>.jsonl`` (30 unsafe and 30 benign questions each, a third
Chinese; ``tune`` is the one the rules may be changed by, ``test`` and ``test2`` (237, written
apart on 2026-12-07) are reported) and prints, per
language, how many unsafe requests the rule declines and how many benign ones it declines too.
``--misses`` lists the questions it gets wrong (read them on ``tune`` and the training sets
only: the rules and the learned rule were fitted on those).

``--set ordinary`` counts the ordinary questions of every code base the benchmarks have (4,498
in all, frozen splits included; never listed) that a rule declines. ``--set harmless`` reads
issue 41's frozen set instead (``bench/questions/harmless/``: 268
harmless questions that look dangerous, and its 76 unsafe requests). Each ``--learned`` model
file (``coderag_retriever/unsafe.json`` or a copy of an earlier one) is scored beside the rules,
alone and as /ask declines (``coderag_generator.refusal.declines``: the rules, or the model on a
question that does not just describe the code or that intends harm all the same), on the same
questions in one run, so a refitted model is measured against the one before it. (Before
2026-12-07 15:00 the second column counted either one declining, which overstated /ask: a
history or trace question the model alone declines is declined only when it ``intends`` harm.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from coderag.language import language
from coderag.settings import get_settings
from coderag.spaces import UNSAFE
from coderag_embedder.queries import embed_queries
from coderag_generator.refusal import declines, is_unsafe
from coderag_retriever.unsafe import load_model

QUESTIONS = Path(__file__).resolve().parent / "questions" / "unsafe"
"""The labelled sets and their README."""


READABLE = ("tune", "train", "train2", "train3", "train4", "train5")
"""The sets whose questions may be read: what the rules and the learned rule were fitted on."""

ORDINARY = QUESTIONS.parent
"""``--set ordinary``: every question of the retrieval benchmark's code bases and of the written
program (``written/``), frozen splits included, all benign: only how many are declined."""

HARMLESS = QUESTIONS.parent / "harmless"
"""Issue 41's frozen set: harmless questions per code base, and ``unsafe.jsonl``."""


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def load(name: str) -> list[dict]:
    """The questions of one set (``harmless``: issue 41's, each labelled)."""
    if name == "ordinary":
        files = [
            *sorted(ORDINARY.glob("*.jsonl")),
            *sorted((ORDINARY / "written").rglob("*.jsonl")),
        ]
        return [
            {"id": q["id"], "query": q["query"], "lang": language(q["query"]), "unsafe": False}
            for p in files
            for q in _read(p)
            if q.get("query")
        ]
    if name != "harmless":
        return _read(QUESTIONS / f"{name}.jsonl")
    rows = [{**q, "unsafe": False} for p in sorted(HARMLESS.glob("h_*.jsonl")) for q in _read(p)]
    return rows + [{**q, "unsafe": True} for q in _read(HARMLESS / "unsafe.jsonl")]


def learned(path: Path, queries: list[str]) -> list[bool]:
    """Whether the learned model in ``path`` declines each question."""
    model = load_model(path)
    if model is None:
        raise SystemExit(f"{path}: no unsafe model there")
    if model.space == UNSAFE:  # the embedder serves the fine-tuned reader only when chosen
        os.environ["CODERAG_UNSAFE_RULE"] = "tuned"
        get_settings.cache_clear()
    vectors = embed_queries(model.space, queries)
    if vectors is None:
        raise SystemExit(f"no encoder feeds {model.space}: check CODERAG_EMBED_MODEL_2")
    return [
        model.p_unsafe(np.asarray(v, dtype=np.float64), q) >= model.threshold
        for v, q in zip(vectors, queries, strict=True)
    ]


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
            f"| {lang} ({len(bad)} + {len(good)}) | {_share(caught, len(bad))} "
            f"| {_share(wrong, len(good))} |"
        )
    return lines


def _share(n: int, of: int) -> str:
    return f"{n / of:.2f} ({n})" if of else "-"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--set", default="test", choices=(*READABLE, "test", "test2", "harmless", "ordinary")
    )
    ap.add_argument("--misses", action="store_true", help="list the questions judged wrong")
    ap.add_argument("--learned", type=Path, action="append", default=[], help="a model file")
    args = ap.parse_args(argv)
    if args.misses and args.set not in READABLE:
        ap.error("--misses: read the questions judged wrong on tune and train* only (frozen sets)")
    rows = [{**q, "declined": is_unsafe(q["query"])} for q in load(args.set)]
    print(f"set {args.set}: {len(rows)} questions\n\nthe hand-written rules")
    print("\n".join(report(rows)))
    for path in args.learned:
        said = learned(path, [r["query"] for r in rows])
        alone = [{**r, "declined": d} for r, d in zip(rows, said, strict=True)]
        asked = [
            {**r, "declined": declines(r["query"], d)} for r, d in zip(rows, said, strict=True)
        ]
        print(f"\n{path}, alone\n" + "\n".join(report(alone)))
        print(f"\n{path} with the rules, as /ask declines\n" + "\n".join(report(asked)))
        if args.misses:
            rows = asked
    if args.misses:
        for r in rows:
            if r["declined"] != r["unsafe"]:
                label = "missed" if r["unsafe"] else "declined"
                print(f"{label}\t{r['id']}\t{r['kind']}\t{r['query']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
