"""Candidate lists for the cross-encoder (issue 31): each benchmark question's top hits from the
shipped search, with their text and whether they hit gold, and random units of the same
repository, so training (tuning splits) and evaluation (frozen splits) read one file each.

    CODERAG_DATA_DIR=bench/.cache/data python -m bench.rerank_data [--split tune ...] [--reuse]
        # bench/.cache/rerank/<corpus>.jsonl, one question a line
    CODERAG_DATA_DIR=bench/.cache/data python -m bench.rerank_data --written wtrain \\
        --folds bench/.cache/models/folds          # and --written wtest: written/<corpus>.jsonl

Each candidate carries the learned ranker's confidence and rank, so the reranker's combination
with it is fitted on the tuning lists and measured on the frozen ones without searching again.
Absent questions are written too (no gold): the refusal rule is fitted on them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("CODERAG_DATA_DIR", str(HERE / ".cache" / "data"))

from bench.fetch import load_corpora  # noqa: E402
from bench.retrieval import index_corpus, load_questions, overlaps  # noqa: E402
from coderag.schemas import Unit  # noqa: E402
from coderag.settings import get_settings  # noqa: E402
from coderag.store import get_catalog  # noqa: E402
from coderag_retriever.index import get_index_cache  # noqa: E402
from coderag_retriever.query import Query  # noqa: E402
from coderag_retriever.search import rank  # noqa: E402

OUT = HERE / ".cache" / "rerank"
"""One candidates file per corpus."""

DEPTH = 30
"""Hits kept per question."""

RANDOM = 20
"""Random units of the same repository kept per question (easy negatives)."""

TEXT_CHARS = 4000
"""Characters of a unit's text kept: more than any reranker here reads."""


def unit_record(u: Unit) -> dict:
    """What the reranker may read of a unit, and where it is."""
    return {
        "file": u.file,
        "start": u.start_line,
        "end": u.end_line,
        "symbol": u.symbol,
        "kind": u.kind,
        "language": u.language,
        "signature": u.signature,
        "doc": u.doc[:1000],
        "text": u.text[:TEXT_CHARS],
        "is_test": u.is_test,
    }


def hits_gold(u: Unit, gold: list[dict]) -> bool:
    """Whether a unit overlaps any gold range."""
    return any(overlaps((u.file, u.start_line, u.end_line), g) for g in gold)


def collect(
    corpus: dict,
    reuse: bool,
    questions: list[dict] | None = None,
    out: Path | None = None,
    ranker_path: str = "",
) -> Path:
    """Index one corpus (or reuse its index) and write its questions' candidate lists
    (``questions``: these instead of its benchmark file; ``ranker_path``: this ranker's hits)."""
    update: dict = {"ranker": "learned", "rerank_model": ""}
    if ranker_path:
        update["ranker_path"] = ranker_path
    settings = get_settings().model_copy(update=update)
    name = corpus["name"]
    index_corpus(corpus, reuse)
    index = get_index_cache().get(get_catalog(), name)
    rng = random.Random(name)
    out = OUT if out is None else out
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for q in load_questions(name) if questions is None else questions:
            gold = q.get("gold") or []
            ranked = rank(name, q["query"], DEPTH, settings)
            cands = []
            for i, r in enumerate(ranked, 1):
                rec = unit_record(r.unit)
                rec.update(rank=i, confidence=r.confidence, label=int(hits_gold(r.unit, gold)))
                cands.append(rec)
            randoms = [
                {**unit_record(index.units[p]), "label": int(hits_gold(index.units[p], gold))}
                for p in rng.sample(range(len(index)), min(RANDOM, len(index)))
            ]
            golds = [unit_record(u) for u in index.units if gold and hits_gold(u, gold)][:3]
            query = Query(name, q["query"], settings.zh_vocab, settings.zh_dictionary)
            f.write(
                json.dumps(
                    {
                        "id": q["id"],
                        "corpus": name,
                        "split": corpus.get("split", "tune"),
                        "code_language": corpus["language"],
                        "lang": q["lang"],
                        "type": q["type"],
                        "style": q.get("style", ""),
                        "query": q["query"],
                        "reader_query": query.embedding_text(),
                        "gold": gold,
                        "candidates": cands,
                        "randoms": randoms,
                        "golds": golds,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    print(f"{name}: {path}", file=sys.stderr, flush=True)
    return path


def bm25(docs: list[list[str]], query: list[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 of one query against tokenised documents."""
    import math
    from collections import Counter

    n = len(docs)
    avg = sum(map(len, docs)) / max(n, 1)
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    terms = set(query)
    out = []
    for d in docs:
        tf = Counter(t for t in d if t in terms)
        s = 0.0
        for t, c in tf.items():
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += idf * c * (k1 + 1) / (c + k1 * (1 - b + b * len(d) / avg))
        out.append(s)
    return out


def collect_mined(entry: dict, limit: int) -> Path | None:
    """Candidate lists of a mined code base's questions over its doc-blanked copy: the parser's
    units ranked by BM25 (no index, no encoders: hard negatives that share the question's
    words), with random units of the same code base."""
    from bench.mine import source_files
    from coderag_parser.units import parse_source
    from coderag_retriever.text import code_tokens, query_tokens

    name = entry["name"]
    questions = HERE / ".cache" / "mined" / f"{name}.jsonl"
    root = HERE / ".cache" / "src" / f"{name}-nodoc"
    if not (questions.exists() and root.is_dir()):
        print(f"no mined questions for {name}: run bench/mine.py {name}", file=sys.stderr)
        return None
    units: list[Unit] = []
    for rel, language in source_files(root):
        source = (root / rel).read_text("utf-8", errors="replace")
        units += parse_source(name, rel, language, source).units
    if len(units) < 2:
        return None
    docs = [code_tokens(f"{u.symbol} {u.text}") for u in units]
    rows = [json.loads(line) for line in questions.read_text("utf-8").splitlines()]
    random.Random(name).shuffle(rows)
    rng = random.Random(name)
    out = OUT / "mined"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for q in rows[:limit]:
            gold = q["gold"]
            scores = bm25(docs, query_tokens(q["query"], True, True))
            order = sorted(range(len(units)), key=lambda i: -scores[i])[:DEPTH]
            cands = [
                {**unit_record(units[i]), "rank": r, "label": int(hits_gold(units[i], gold))}
                for r, i in enumerate(order, 1)
            ]
            randoms = [
                {**unit_record(units[i]), "label": int(hits_gold(units[i], gold))}
                for i in rng.sample(range(len(units)), min(RANDOM, len(units)))
            ]
            golds = [unit_record(u) for u in units if hits_gold(u, gold)][:3]
            if not golds:
                continue
            query = Query(name, q["query"], True, True)
            f.write(
                json.dumps(
                    {
                        "id": q.get("id", ""),
                        "corpus": name,
                        "split": "mined",
                        "code_language": entry["language"],
                        "lang": q.get("lang", "en"),
                        "type": q.get("type", ""),
                        "style": q.get("source", ""),
                        "query": q["query"],
                        "reader_query": query.embedding_text(),
                        "gold": gold,
                        "candidates": cands,
                        "randoms": randoms,
                        "golds": golds,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    print(f"{name}: {path}", file=sys.stderr, flush=True)
    return path


def collect_written(split: str, folds: Path | None, only: list[str]) -> int:
    """Candidate lists of the written questions (issue 44) of every code base of ``split``
    whose index is complete here, in ``OUT/written``: ``wtrain``'s each retrieved by its fold
    ranker (the shipped one was fitted on them), ``wtest``'s by the shipped ranker."""
    from bench.written_retrieval import code_bases, questions
    from coderag.errors import NotFound
    from coderag_training.fit.ranker import fold_ranker

    if split == "wtrain" and folds is None:
        print("--written wtrain needs --folds: the shipped ranker saw these", file=sys.stderr)
        return 2
    catalog = get_catalog()
    for entry in code_bases(split):
        name = entry["name"]
        if only and name not in only:
            continue
        try:
            if not catalog.get_repo(name).complete:
                continue
        except NotFound:
            continue  # not indexed here
        ranker = str(fold_ranker(folds, name)) if folds is not None else ""
        if ranker and not Path(ranker).is_file():
            print(f"{ranker}: missing; run coderag_training.fit.ranker --fold-rankers",
                  file=sys.stderr)  # fmt: skip
            return 2
        qs = [{**q, "split": split} for q in questions(name)]
        collect({**entry, "split": split}, True, qs, OUT / "written", ranker)
    return 0


def main() -> int:
    """Collect candidate lists for the chosen splits."""
    global OUT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", action="append", help="only these splits (default: all)")
    ap.add_argument("--corpus", action="append", help="only these corpora")
    ap.add_argument("--reuse", action="store_true", help="keep indexes of an earlier run")
    ap.add_argument(
        "--mined", type=int, default=0, help="instead: this many mined questions per code base"
    )
    ap.add_argument("--out", type=Path, default=OUT, help=f"where the lists go (default {OUT})")
    ap.add_argument(
        "--written",
        choices=("wtrain", "wtest"),
        help="instead: the written questions of this split's code bases indexed here",
    )
    ap.add_argument(
        "--folds",
        type=Path,
        help="with --written wtrain: fit.ranker --fold-rankers' folder, so each code base's "
        "hits come from a ranker that never saw it",
    )
    args = ap.parse_args()
    OUT = args.out
    if args.written:
        return collect_written(args.written, args.folds, args.corpus or [])
    if args.mined:
        from bench.fetch import load_mining

        for entry in load_mining():
            if not args.corpus or entry["name"] in args.corpus:
                collect_mined(entry, args.mined)
        return 0
    for corpus in load_corpora():
        if args.split and corpus.get("split", "tune") not in args.split:
            continue
        if args.corpus and corpus["name"] not in args.corpus:
            continue
        collect(corpus, args.reuse)
    return 0


if __name__ == "__main__":
    sys.exit(main())
