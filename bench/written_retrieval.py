"""Retrieval on the written questions (issue 44): the frozen ``wtest`` split or the training code
bases, each indexed from its pinned source, with R@1, R@5 and MRR@10 by question language,
type, style and code language.

    python -m bench.written_retrieval --split wtest [--reuse] [--ranks R.json] [--out M.md]
    python -m bench.written_retrieval --split wtrain --reuse --dump-features F.jsonl --dump-only

``wtest`` is the code bases of ``bench/written/wtest-*.json`` (frozen: read only to measure);
``wtrain`` is those of ``bench/mining.json``, whose written questions train the ranker.
``--dump-features`` writes the learned ranker's candidate rows for ``coderag_training.fit.ranker``
(refused on ``wtest``); ``--ranks`` keeps each question's first gold rank per system, so two
runs can be compared question by question. ``CODERAG_RANKER_PATH`` picks the ranker measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from bench.baselines import K
from bench.corpus import HERE, index_corpus
from bench.fetch import WRITTEN_DIR, corpus_root, load_corpora, load_mining
from bench.ranker_rows import dump_features
from bench.retrieval import DEFAULT, _metrics, first_rank  # sets the data directory
from coderag.settings import get_settings
from coderag_retriever.retrieval import retrieve

QUESTIONS = HERE / "questions" / "written"
"""One JSON-lines file of written questions per code base."""

GROUPS = ("lang", "type", "style")
"""Question fields the report breaks the figures down by."""


def code_bases(split: str) -> list[dict]:
    """The code bases of one split, each with a written-questions file."""
    if split == "wtest":
        entries = [
            e
            for path in sorted(WRITTEN_DIR.glob("wtest-*.json"))
            for e in load_corpora(path)
            if e.get("split") == "wtest"
        ]
    else:
        entries = load_mining()
    return [e for e in entries if (QUESTIONS / f"{e['name']}.jsonl").is_file()]


SOURCE_SUFFIXES = frozenset(
    (".py", ".go", ".rs", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".c", ".h", ".java")
)
"""Files counted by ``source_lines``."""


def source_lines(root: Path) -> int:
    """Lines of source code under ``root`` (what indexing time grows with)."""
    total = 0
    for path in root.rglob("*"):
        if path.suffix in SOURCE_SUFFIXES and path.is_file():
            with path.open("rb") as f:
                total += sum(1 for _ in f)
    return total


def questions(name: str) -> list[dict]:
    """A code base's answerable written questions (absent ones have no gold to rank)."""
    path = QUESTIONS / f"{name}.jsonl"
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [q for q in rows if q.get("gold") and q["type"] != "absent"]


def run(
    entries: list[dict], reuse: bool, sink, dump_only: bool
) -> tuple[dict[str, dict[str, list]], dict[str, dict[str, int | None]]]:
    """Index each code base and rank its questions; (stats by system and group, ranks by
    system and question id)."""
    settings = get_settings()
    # the shipped default only: the cross-encoder is off by default and ablations cost hours
    rows = {DEFAULT: settings.model_copy(update={"ranker": "learned"})}
    stats: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    ranks: dict[str, dict[str, int | None]] = defaultdict(dict)
    for n, entry in enumerate(entries, 1):
        name = entry["name"]
        seconds, reused = index_corpus(entry, reuse)
        qs = questions(name)
        state = "reused" if reused else f"indexed in {seconds:.0f} s"
        print(f"[{n}/{len(entries)}] {name}: {len(qs)} questions, {state}", file=sys.stderr)
        if sink is not None:
            dump_features(name, qs, settings, sink)
            sink.flush()
        if dump_only:
            continue
        for q in qs:
            for label, s in rows.items():
                hits = retrieve(name, q["query"], K, s, with_code=False).hits
                r = first_rank([(h.file, h.start_line, h.end_line) for h in hits], q["gold"])
                ranks[label][q["id"]] = r
                keys = ["all", entry["language"], *(f"{g}:{q.get(g, '-')}" for g in GROUPS)]
                for key in keys:
                    stats[label][key].append(r)
    return stats, ranks


def report(split: str, stats: dict[str, dict[str, list]]) -> str:
    """The markdown table: one row per group, one column per system."""
    labels = list(stats)
    out = [
        f"### Written questions, split {split} (R@1 / R@5 / MRR@{K})",
        "",
        "| group | n | " + " | ".join(labels) + " |",
        "|---|---|" + "---|" * len(labels),
    ]
    keys = sorted(stats[labels[0]], key=lambda k: (k != "all", ":" in k, k))
    for key in keys:
        n = len(stats[labels[0]][key])
        cells = [_metrics(stats[label][key]).replace(" | ", " / ") for label in labels]
        out.append(f"| {key} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> int:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("wtest", "wtrain"), required=True)
    ap.add_argument("--corpus", action="append", help="only these code bases")
    ap.add_argument(
        "--smallest",
        type=int,
        help="only the N code bases of fewest source lines (a training run's indexing budget)",
    )
    ap.add_argument("--reuse", action="store_true", help="keep indexes of an earlier run")
    ap.add_argument("--dump-features", type=Path, help="write the ranker's rows here (wtrain)")
    ap.add_argument("--dump-only", action="store_true", help="index and dump, no figures")
    ap.add_argument("--ranks", type=Path, help="write each question's first gold rank here")
    ap.add_argument("--out", type=Path, help="write the markdown report here")
    args = ap.parse_args()
    if args.dump_features and args.split == "wtest":
        ap.error("--dump-features: wtest is frozen; its rows would train on the test split")
    entries = [e for e in code_bases(args.split) if not args.corpus or e["name"] in args.corpus]
    if args.smallest:
        entries = sorted(entries, key=lambda e: source_lines(corpus_root(e["name"])))
        entries = entries[: args.smallest]
    sink = args.dump_features.open("w", encoding="utf-8") if args.dump_features else None
    try:
        stats, ranks = run(entries, args.reuse, sink, args.dump_only)
    finally:
        if sink is not None:
            sink.close()
    if args.dump_only:
        return 0
    text = report(args.split, stats)
    print(text)
    if args.out:
        args.out.write_text(text, "utf-8")
    if args.ranks:
        args.ranks.write_text(json.dumps(ranks, indent=0) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
