"""The learned ranker's training rows (``bench/retrieval.py --dump-features``): each question's
candidates, their features and labels, one JSON line per question, for the benchmark's own
questions and for generated ones over a code base's doc-blanked copy."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.corpus import HERE, index_corpus, overlaps
from bench.fetch import corpus_root
from coderag.settings import Settings


def labels(index, positions: list[int], golds: list[dict]) -> list[int]:
    """1 for a candidate overlapping a gold range, else 0."""
    out = []
    for p in positions:
        u = index.units[p]
        out.append(int(any(overlaps((u.file, u.start_line, u.end_line), g) for g in golds)))
    return out


def dump_features(name: str, questions: list[dict], settings: Settings, sink) -> None:
    """Write each question's candidates, features and labels (one JSON line per question)."""
    from coderag_retriever.learned import features
    from coderag_retriever.search import gather

    base = settings.model_copy(update={"ranker": "learned"})
    for q in questions:
        pool = gather(name, q["query"], base)
        if pool is None:
            continue
        positions, x = features(pool.query, pool.index, pool.rankings, pool.candidates(), pool.flow)
        sink.write(
            json.dumps(
                {
                    "id": q["id"],
                    "corpus": name,
                    "lang": q["lang"],
                    "type": q["type"],
                    "x": x.round(5).tolist(),
                    "y": labels(pool.index, positions, q["gold"]),
                    "fused": [pool.expanded[p] for p in positions],
                }
            )
            + "\n"
        )


def dump_generated_features(
    entry: dict, questions: Path, root: Path, reuse: bool, settings: Settings, sink, limit: int
) -> None:
    """Features of up to ``limit`` generated questions (a seeded sample of the ``questions``
    file) over a code base's doc-blanked copy at ``root``, indexed as ``<name>-nodoc``."""
    import random

    rows = [json.loads(line) for line in questions.read_text("utf-8").splitlines()]
    random.Random(0).shuffle(rows)
    copy = {**entry, "name": f"{entry['name']}-nodoc"}
    index_corpus(copy, reuse, root)
    dump_features(copy["name"], rows[:limit], settings, sink)
    print(f"{entry['name']}: {min(limit, len(rows))} generated questions", file=sys.stderr)


def dump_doc_features(corpus: dict, reuse: bool, settings: Settings, sink, limit: int) -> None:
    """Features of up to ``limit`` doc-comment questions over the corpus's doc-blanked copy
    (``bench/docquestions.py`` makes both)."""
    name = corpus["name"]
    path = HERE / ".cache" / "docquestions" / f"{name}.jsonl"
    if not path.exists():
        print(f"no doc questions for {name}: run bench/docquestions.py {name}", file=sys.stderr)
        return
    root = corpus_root(name).parent / f"{name}-nodoc"
    dump_generated_features(corpus, path, root, reuse, settings, sink, limit)


def dump_mined_features(entry: dict, reuse: bool, settings: Settings, sink, limit: int) -> None:
    """Features of up to ``limit`` questions mined from a code base of ``bench/mining.json``,
    over its doc-blanked copy (``bench/mine.py`` makes both)."""
    name = entry["name"]
    path = HERE / ".cache" / "mined" / f"{name}.jsonl"
    root = HERE / ".cache" / "src" / f"{name}-nodoc"
    if not (path.exists() and root.is_dir()):
        print(f"no mined questions for {name}: run bench/mine.py {name}", file=sys.stderr)
        return
    dump_generated_features(entry, path, root, reuse, settings, sink, limit)
