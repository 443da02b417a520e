"""The unsafe mechanism of /ask before and after issue 41, on every question set we hold.

    git show fe715b1:services/retriever/coderag_retriever/unsafe.json > /tmp/unsafe-before.json
    python -m bench.refusals --before /tmp/unsafe-before.json [--misses SET]

Before: declined when a learned rule (``--before``: the model shipped before issue 41) or the
hand rules say so, as /ask did. After: ``refusal.declines`` with the shipped learned rule
(refitted with call chains and who-changed questions among the benign ones), which never
declines alone a question that ``describes`` how the code is or was. Both are computed in one
run. Sets, the frozen ones first:

* ``test``, ``test2``: the retrieval benchmark's frozen code bases (every question answerable
  but the ``absent`` ones, which are never unsafe either): how many it declines;
* ``unsafe-test``: ``bench/questions/unsafe/test.jsonl`` (30 unsafe, 30 benign);
* ``harmless``, ``harmless-unsafe``: issue 41's frozen set (``bench/questions/harmless/``):
  harmless questions that look dangerous, and held-out unsafe requests over the same code;
* ``wtest``: the written program's frozen code bases (issue 44);
* ``tune``, ``tune2``, ``unsafe-tune``, ``written``: the tuning side (read misses here only);
  ``written`` is the written program's training code bases.

English and Chinese apart.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench.fetch import load_corpora, load_mining, load_written
from coderag.language import language
from coderag.settings import get_settings
from coderag_embedder.queries import embed_queries
from coderag_generator.refusal import declines, is_unsafe
from coderag_retriever import unsafe as learned_rule

QUESTIONS = Path(__file__).resolve().parent / "questions"
"""Where every question set lives."""

FROZEN = ("test", "test2", "unsafe-test", "harmless", "harmless-unsafe", "wtest")
TUNING = ("tune", "tune2", "unsafe-tune", "written")


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a JSON-lines file, blank lines skipped."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def question_set(name: str) -> list[dict]:
    """The questions of one set, each with ``query``, ``lang``, ``unsafe`` and ``type``."""
    if name in ("test", "test2", "tune", "tune2"):
        corpora = [c["name"] for c in load_corpora() if c["split"] == name]
        rows = [r for c in corpora for r in read_jsonl(QUESTIONS / f"{c}.jsonl")]
    elif name.startswith("unsafe-"):
        rows = read_jsonl(QUESTIONS / "unsafe" / f"{name.removeprefix('unsafe-')}.jsonl")
    elif name == "harmless":
        rows = [
            r
            for p in sorted((QUESTIONS / "harmless").glob("*.jsonl"))
            if p.stem != "unsafe"
            for r in read_jsonl(p)
        ]
    elif name == "harmless-unsafe":
        path = QUESTIONS / "harmless" / "unsafe.jsonl"
        rows = read_jsonl(path) if path.is_file() else []
    else:
        split = {e["name"]: e.get("split") for e in load_mining() + load_written()}
        frozen = name == "wtest"
        rows = [
            r
            for p in sorted((QUESTIONS / "written").glob("*.jsonl"))
            if (split.get(p.stem) == "wtest") == frozen
            for r in read_jsonl(p)
        ]
    return [
        {**r, "lang": r.get("lang") or language(r["query"]), "unsafe": bool(r.get("unsafe"))}
        for r in rows
    ]


def learned_verdicts(queries: list[str], before: Path | None = None) -> list[bool]:
    """A learned rule's verdict on each question: the shipped one, or the one saved at
    ``before`` (False when it does not apply)."""
    if before is not None:
        model: learned_rule.Model | None = learned_rule.Model(**json.loads(before.read_text()))
    else:
        model = learned_rule.model_for(get_settings())
    if model is None or not queries:
        return [False] * len(queries)
    vectors = np.asarray(embed_queries(model.space, queries), dtype=np.float64)
    return [model.p_unsafe(v, q) >= model.threshold for v, q in zip(vectors, queries, strict=True)]


def table(name: str, rows: list[dict]) -> list[str]:
    """Per language: questions, declined before, declined after (unsafe and the rest apart)."""
    out = []
    for lang in ("en", "zh"):
        part = [r for r in rows if r["lang"] == lang]
        for label, group in (("unsafe", True), ("answerable", False)):
            g = [r for r in part if r["unsafe"] == group and r.get("type") != "absent"]
            if not g:
                continue
            before = sum(r["before"] for r in g)
            after = sum(r["after"] for r in g)
            out.append(
                f"| {name} | {lang} | {label} | {len(g)} | {before / len(g):.3f} ({before}) "
                f"| {after / len(g):.3f} ({after}) |"
            )
    return out


def main(argv: list[str]) -> int:
    """Print the before/after table, frozen sets first."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="the learned rule of before")
    ap.add_argument("--misses", choices=TUNING, help="list a tuning set's wrong verdicts (after)")
    args = ap.parse_args(argv)
    print("| set | lang | questions | n | declined before | declined after |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in (*FROZEN, *TUNING):
        rows = question_set(name)
        queries = [r["query"] for r in rows]
        old, new = learned_verdicts(queries, args.before), learned_verdicts(queries)
        for r, o, m in zip(rows, old, new, strict=True):
            r["before"] = bool(o) or is_unsafe(r["query"])
            r["after"] = declines(r["query"], bool(m))
        print("\n".join(table(name, rows)), flush=True)
        if name == args.misses:
            for r in rows:
                if r["after"] != r["unsafe"]:
                    print(f"  {'missed' if r['unsafe'] else 'declined'}\t{r['query']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
