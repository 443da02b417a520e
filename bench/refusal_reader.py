"""Lever 5 of issue 31 with a reader: does the cross-encoder's relevance separate absent
questions from answerable ones better than what the refusal rule reads today?

    CODERAG_DATA_DIR=bench/.cache/data python -m bench.refusal_reader --run lambda-1e-4

For every question of every corpus whose hits ``bench/answers.py`` saved
(``bench/.cache/answers-hits``: the tuning corpora's retrieved by rankers that never saw them,
the frozen ones' by the shipped ranker), the cross-encoder of a ``coderag_training.fit.listwise``
run scores its first ``--top`` hits (cached in the run's directory). Two rules are then fitted as
``coderag_training.fit.refusal`` fits the shipped one, today's ``relevance.FEATURES`` alone and with
the reader's features added (its logit for the first hit, its best over the first ``--top``,
the first hit's margin over the rest):

1. leave one tuning corpus out (the threshold chosen on the other corpora, the held-out one
   judged); the reader learned from the ``tune`` split's answerable questions, so its figures
   there flatter it and only the ``tune2`` corpora's rows are clean;
2. fitted on every tuning corpus, then the frozen splits judged once (test first).

A rule that refuses on the reader needs the reader served on every ``/ask``; nothing here
changes what ships.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from bench.fetch import load_corpora
from coderag.embedding import reader_text
from coderag.settings import Settings
from coderag_retriever import relevance
from coderag_training.fit import refusal as tr
from coderag_training.fit.listwise import RUNS, Scorer, model_dir

READER = ("reader_first", "reader_best", "reader_margin")
"""The reader's features, beside ``relevance.FEATURES``."""


def reader_query(corpus: str, text: str, settings: Settings) -> str:
    """What the reader reads of a question: as training read it (Chinese with English words)."""
    from coderag_retriever.query import Query

    return Query(corpus, text, settings.zh_vocab, settings.zh_dictionary).embedding_text()


def reader_scores(run: str, corpora: list[str], top: int, threads: int) -> dict[str, list]:
    """corpus -> per question, the reader's logits for its first ``top`` saved hits."""
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder

    cache = RUNS / run / f"refusal-scores-top{top}.json"
    known: dict[str, list] = json.loads(cache.read_text("utf-8")) if cache.is_file() else {}
    todo = [c for c in corpora if c not in known]
    if todo:
        torch.set_num_threads(threads)
        reader = Scorer(CrossEncoder(str(model_dir(RUNS / run)), local_files_only=True))
        settings = Settings()
        for name in todo:
            rows = []
            for q, hits in tr.saved(name):
                texts = [
                    reader_text(h.file, h.kind, h.symbol, h.doc, h.text or "") for h in hits[:top]
                ]
                query = reader_query(name, q["query"], settings)
                rows.append(reader.scores(query, texts) if texts else [])
            known[name] = rows
            cache.write_text(json.dumps(known), "utf-8")
            print(f"scored {name}: {len(rows)} questions", file=sys.stderr, flush=True)
    return known


def reader_features(scores: list[float]) -> list[float]:
    """First hit's logit, the best of the first few, the first's margin over the rest."""
    if not scores:
        return [-10.0, -10.0, 0.0]
    rest = max(scores[1:], default=scores[0] - 1.0)
    return [scores[0], max(scores), scores[0] - rest]


def judged(x, y, pre, open_, fit_rows, judge_rows, l2, max_fr):  # type: ignore[no-untyped-def]
    """Refused or not for ``judge_rows`` under a rule fitted on ``fit_rows``."""
    f, j = fit_rows, judge_rows
    model, t, _, _ = tr.rule(x[f], y[f], pre[f], open_[f], l2, max_fr)
    return tr.refuses(model, t, x[j], pre[j], open_[j])


def line(label: str, refused: np.ndarray, y: np.ndarray) -> str:
    """One table row: absent refused / answerable refused, with counts."""
    ra, fr = tr.rates(refused, y)
    return (
        f"| {label} | {int(y.sum())} / {int((~y).sum())} | {ra:.2f} ({int(refused[y].sum())}) | "
        f"{fr:.2f} ({int(refused[~y].sum())}) |"
    )


def main() -> int:
    """Score, fit both rules, print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a coderag_training.fit.listwise run's name")
    ap.add_argument("--top", type=int, default=3, help="hits the reader scores per question")
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--max-false-refusals", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    corpora = load_corpora()
    tuning = [c["name"] for c in corpora if c.get("split", "tune").startswith("tune")]
    tune2 = {c["name"] for c in corpora if c.get("split") == "tune2"}
    frozen = {s: [c["name"] for c in corpora if c.get("split") == s] for s in ("test", "test2")}
    names = tuning + frozen["test"] + frozen["test2"]
    scores = reader_scores(args.run, names, args.top, args.threads)
    x, y, pre, open_, corpus_of = tr.cases(names)
    extra = np.array([reader_features(s) for n in names for s in scores[n]])
    both = np.hstack([x, extra])
    corpus = np.array(corpus_of)
    tuning_rows = np.isin(corpus, tuning)
    zh = x[:, list(relevance.FEATURES).index("chinese")] == 1.0
    print(f"reader: {model_dir(RUNS / args.run)}, first {args.top} hits\n")
    print("Leave one tuning corpus out (the `tune` corpora's rows flatter the reader, which")
    print("learned from their answerable questions):\n")
    print("| rule, rows | absent / answerable | absent refused | answerable refused |")
    print("| --- | --- | --- | --- |")
    for label, feats in (("today", x), ("+ reader", both)):
        pooled = np.zeros(len(y), bool)
        for held in tuning:
            h = corpus == held
            pooled[h] = judged(feats, y, pre, open_, tuning_rows & ~h, h, args.l2,
                               args.max_false_refusals)  # fmt: skip
        clean = np.isin(corpus, list(tune2))
        for part, rows in (("all tuning", tuning_rows), ("tune2 corpora only", clean)):
            print(line(f"{label}, {part}", pooled[rows], y[rows]))
    print("\nFitted on every tuning corpus, the frozen splits judged:\n")
    print("| split, rule | absent / answerable | absent refused | answerable refused |")
    print("| --- | --- | --- | --- |")
    for split in ("test", "test2"):
        rows = np.isin(corpus, frozen[split])
        for label, feats in (("today", x), ("+ reader", both)):
            refused = judged(feats, y, pre, open_, tuning_rows, rows, args.l2,
                             args.max_false_refusals)  # fmt: skip
            print(line(f"**{split}**, {label}", refused, y[rows]))
            for lang, mask in (("English", ~zh[rows]), ("Chinese", zh[rows])):
                print(line(f"{split}, {label}, {lang}", refused[mask], y[rows][mask]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
