"""Identifiers described in both languages at index time (issue 9): the shipped search against
the same search whose BM25 documents also hold Chinese words for each unit's name, on the
pinned corpora's written questions.

    python bench/bilingual_index.py [--split test|tune] [--corpus NAME ...]

The Chinese words come from CC-CEDICT read backwards: an English word of the unit's qualified
name gets the Chinese words whose glosses (``coderag_retriever.dictionary``) are that word
alone or with one other. A Chinese question then matches them with its own words, segmented
against CC-CEDICT and the hand vocabulary, beside the English the search already adds. The
vectors are unchanged: describing units in Chinese for the encoders would mean re-encoding every
unit with both of them (hours on 2 cores). The variant is patched in here, not shipped: what
wins goes into the product, what loses stays a row in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from encoder_input import metrics  # noqa: E402
from fetch import load_corpora  # noqa: E402
from retrieval import K, first_rank, load_questions  # noqa: E402

from coderag import embedding  # noqa: E402
from coderag.language import HAN_RUN  # noqa: E402
from coderag.settings import get_settings  # noqa: E402
from coderag_embedder.queries import local  # noqa: E402
from coderag_retriever import dictionary, query, shards  # noqa: E402
from coderag_retriever.index import get_index_cache  # noqa: E402
from coderag_retriever.search import rank  # noqa: E402
from coderag_retriever.text import STOP_WORDS, ZH_STOP, stem, zh_vocabulary  # noqa: E402

embedding.use_local(local())

PER_WORD = 3
"""Chinese words added per English word of a name."""


def reverse() -> dict[str, list[str]]:
    """Stemmed English word -> Chinese words whose glosses are that word (alone or with one)."""
    out: dict[str, list[str]] = defaultdict(list)
    for zh, words in dictionary.entries(STOP_WORDS).items():
        if len(words) <= 2:
            for w in words:
                if len(out[stem(w)]) < PER_WORD:
                    out[stem(w)].append(zh)
    return out


@cache
def _known() -> frozenset[str]:
    return frozenset(dictionary.entries(STOP_WORDS)) | frozenset(zh_vocabulary())


def chinese_words(text: str) -> list[str]:
    """The question's Chinese words, by longest match against CC-CEDICT and the vocabulary."""
    known = _known()
    out = []
    for run in HAN_RUN.findall(text):
        i = 0
        while i < len(run):
            for size in range(min(6, len(run) - i), 1, -1):
                piece = run[i : i + size]
                if piece in known:
                    if piece not in ZH_STOP:
                        out.append(piece)
                    i += size
                    break
            else:
                i += 1
    return out


def patch() -> None:
    """Switch the in-process search to the bilingual documents and question tokens."""
    table = reverse()
    plain_document, plain_tokens = shards.keyword_document, query.query_tokens

    def document(unit):
        extra = [zh for w in shards.symbol_token_set(unit) for zh in table.get(w, ())]
        return plain_document(unit) + extra

    def tokens(text, vocab=True, dictionary=False):
        return plain_tokens(text, vocab, dictionary) + chinese_words(text)

    shards.keyword_document, query.query_tokens = document, tokens


def run(corpora: list[str]) -> dict[str, list[int | None]]:
    """First-hit ranks of every written question, by group, under the current patching."""
    settings = get_settings()
    out: dict[str, list[int | None]] = defaultdict(list)
    for name in corpora:
        get_index_cache().forget(name)
        for q in load_questions(name):
            if q["type"] == "absent":
                continue
            hits = rank(name, q["query"], K, settings)
            r = first_rank([(h.unit.file, h.unit.start_line, h.unit.end_line) for h in hits],
                           q["gold"])  # fmt: skip
            for group in ("all", q["lang"], name):
                out[group].append(r)
        print(f"{name} done", file=sys.stderr, flush=True)
    return out


def main() -> int:
    """Print the two rows."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--split", default="tune", choices=("tune", "test"))
    ap.add_argument("--corpus", action="append", help="only these corpora")
    args = ap.parse_args()
    corpora = [
        c["name"]
        for c in load_corpora()
        if c.get("split", "tune") == args.split and (not args.corpus or c["name"] in args.corpus)
    ]
    rows = {"shipped search": run(corpora)}
    patch()
    rows["+ Chinese words for each unit's name in the BM25 documents"] = run(corpora)
    groups = ["all", "en", "zh", *corpora]
    first = rows["shipped search"]
    print(f"split {args.split}, R@1 / R@5 / MRR@10\n")
    print("| system | " + " | ".join(f"{g} (n={len(first[g])})" for g in groups) + " |")
    print("| --- |" + " --- |" * len(groups))
    for label, got in rows.items():
        print(f"| {label} | " + " | ".join(metrics(got[g]) for g in groups) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
