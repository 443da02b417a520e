"""Fit the learned ranker (``coderag_retriever/ranker.json``) on candidate rows and ship it
with its card.

    python -m coderag_training.fit.ranker ROWS.jsonl [ROWS.jsonl ...] [--out PATH]
    python -m coderag_training.fit.ranker ROWS.jsonl ... --fold-rankers DIR

The rows are bench's output: ``bench/retrieval.py --split tune|tune2 --dump-features`` (the
tuning corpora's questions) and ``bench/written_retrieval.py --split wtrain --dump-features``
(the written questions, issue 44), one JSON line per question with its candidates' features
and labels. Grouped cross-validation by code base picks the loss and the L2 strength (every
fold scored on code bases it never saw, the way a new user's code base is), then one fit on
every row is written with a card: its inputs' sha256, code bases, question counts, the
cross-validated figures. No frozen split (test, test2, wtest) is ever read here.
``--fold-rankers`` writes instead one ranker per tuning corpus, fitted without it, and one per
fold of the written training code bases, fitted without that fold, which ``make models``
retrieves the refusal rule's tuning hits with (``coderag_training.refusal_hits``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from coderag_retriever.learned import Ranker
from coderag_training import cards
from coderag_training.pins import (
    CORPORA_FILE,
    MINING_FILE,
    QUESTIONS,
    ROOT,
    load_corpora,
    relative,
)
from coderag_training.ranker import fit, fit_listwise

SHIPPED = ROOT / "services" / "retriever" / "coderag_retriever" / "ranker.json"
"""Where the shipped ranker lives."""


def frozen() -> frozenset[str]:
    """Corpora of the frozen benchmark splits (read from the checkout when a fit runs, not at
    import: the installed package has no bench/): rows of theirs are refused."""
    return frozenset(
        c["name"] for c in load_corpora() if not c.get("split", "tune").startswith("tune")
    )


L2_GRID = (0.1, 1.0, 10.0, 100.0)
"""L2 strengths tried."""

LOSSES = ("pointwise", "listwise")
"""Log loss per candidate, or softmax cross-entropy per question (ListNet)."""

FOLDS = 10
"""Groups of code bases held out in turn (leave-one-out over 60 and more code bases costs an
hour of fits and tells no more)."""

WRITTEN = "wtrain"
"""The split of a code base ``bench/corpora.json`` does not list: written training questions'
(issue 44); the tuning corpora it lists are ``tune`` and ``tune2``."""

Scorer = Callable[[np.ndarray], np.ndarray]
"""A fitted model's score of each candidate row of a question."""


@dataclass
class Row:
    """One question's candidates: features, labels, and the fused order's scores."""

    id: str
    corpus: str
    x: np.ndarray
    y: np.ndarray
    fused: np.ndarray

    @property
    def home(self) -> str:
        """The code base the question is about (a doc-blanked copy counts as its original)."""
        return self.corpus.removesuffix("-nodoc")


def load_rows(paths: list[Path]) -> list[Row]:
    """Questions with at least one candidate, from ``--dump-features`` files; refuses rows of
    the frozen splits and generated (doc or test name) questions."""
    rows: list[Row] = []
    refused = frozen()
    for path in paths:
        for line in path.read_text("utf-8").splitlines():
            if not line.strip():
                continue
            raw = json.loads(line)
            if raw["corpus"].removesuffix("-nodoc") in refused:
                raise SystemExit(
                    f"{path}: a row of frozen corpus {raw['corpus']!r}; never train on it"
                )
            if "-doc-" in raw["id"] or "-test-" in raw["id"] or not raw["y"]:
                continue
            y = np.array(raw["y"], dtype=np.float64)
            x = np.array(raw["x"], dtype=np.float64).reshape(len(y), -1)
            rows.append(Row(raw["id"], raw["corpus"], x, y, np.array(raw["fused"])))
    return rows


def first_rank(scores: np.ndarray, y: np.ndarray) -> int | None:
    """1-based rank of the first gold candidate when ordered by score (ties keep order)."""
    hits = np.nonzero(y[np.argsort(-scores, kind="stable")] > 0)[0]
    return int(hits[0]) + 1 if len(hits) else None


def metrics(ranks: list[int | None]) -> dict[str, float]:
    """R@1, R@5 and MRR@10 of first-gold ranks."""
    n = len(ranks) or 1
    return {
        "R@1": round(sum(r == 1 for r in ranks) / n, 4),
        "R@5": round(sum(r is not None and r <= 5 for r in ranks) / n, 4),
        "MRR@10": round(sum(1 / r for r in ranks if r is not None and r <= 10) / n, 4),
    }


def train(rows: list[Row], l2: float, loss: str) -> Ranker:
    """Fit on the rows."""
    if loss == "listwise":
        return fit_listwise([(r.x, r.y) for r in rows], l2=l2)
    return fit(np.vstack([r.x for r in rows]), np.concatenate([r.y for r in rows]), l2=l2)


def splits() -> dict[str, str]:
    """Each code base's split as ``bench/corpora.json`` names it (read when called, as
    ``frozen``); a code base it does not list holds written questions (``WRITTEN``)."""
    return {c["name"]: c.get("split", "tune") for c in load_corpora()}


def home_fold(home: str, folds: int = FOLDS) -> int:
    """A code base's fold: a hash of its name."""
    return zlib.crc32(home.encode()) % folds


def fold_of(row: Row, folds: int = FOLDS) -> int:
    """The row's fold: a hash of its code base, so a code base is never split across folds."""
    return home_fold(row.home, folds)


def fold_ranker(folder: Path, home: str, split: dict[str, str] | None = None) -> Path:
    """Where ``--fold-rankers`` keeps the ranker that never saw ``home``: one per tuning corpus,
    one per fold of the written training code bases (a fold's code bases held out together)."""
    split = splits() if split is None else split
    if split.get(home, WRITTEN) == WRITTEN:
        return folder / f"ranker-without-fold-{home_fold(home)}.json"
    return folder / f"ranker-without-{home}.json"


def held_out_ranks(
    rows: list[Row], fit_on: Callable[[list[Row]], Scorer], folds: int = FOLDS
) -> list[int | None]:
    """First-gold ranks of every row, in the rows' order, each scored by ``fit_on`` the rows of
    the other folds: a fit that never saw its code base."""
    ranks: list[int | None] = [None] * len(rows)
    for fold in range(folds):
        held = [i for i, r in enumerate(rows) if fold_of(r, folds) == fold]
        if held:
            score = fit_on([r for r in rows if fold_of(r, folds) != fold])
            for i in held:
                ranks[i] = first_rank(score(rows[i].x), rows[i].y)
    return ranks


def cross_validate(rows: list[Row], l2: float, loss: str) -> list[int | None]:
    """First-gold ranks of every row, each scored by a fit that never saw its code base."""
    return held_out_ranks(rows, lambda train_rows: train(train_rows, l2, loss).score)


def select(rows: list[Row]) -> tuple[tuple[float, str], dict[str, dict[str, float]]]:
    """The (L2, loss) of best cross-validated MRR@10, and every setting's figures."""
    table: dict[str, dict[str, float]] = {
        "fused order": metrics([first_rank(r.fused, r.y) for r in rows])
    }
    best, best_mrr = (L2_GRID[0], LOSSES[0]), -1.0
    for loss in LOSSES:
        for l2 in L2_GRID:
            started = time.perf_counter()
            got = metrics(cross_validate(rows, l2, loss))
            table[f"{loss}, L2 {l2}"] = got
            print(f"{loss}, L2 {l2}: {got} ({time.perf_counter() - started:.0f} s)", flush=True)
            if got["MRR@10"] > best_mrr:
                best, best_mrr = (l2, loss), got["MRR@10"]
    return best, table


def main(argv: list[str] | None = None) -> int:
    """Pick the loss and L2 by cross-validation, fit on every row, write the ranker and its card."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", type=Path, nargs="+", help="--dump-features files")
    ap.add_argument("--out", type=Path, default=SHIPPED)
    ap.add_argument(
        "--fold-rankers", type=Path, help="instead: one ranker per tuning corpus and written fold"
    )
    ap.add_argument("--l2", type=float, help="skip the grid: this L2 (with --loss)")
    ap.add_argument("--loss", choices=LOSSES, default="pointwise")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    rows = load_rows(args.rows)
    if not rows:
        ap.error("no rows with candidates in the given files")
    print(f"{len(rows)} questions over {len({r.home for r in rows})} code bases", flush=True)
    if args.fold_rankers:
        meta = json.loads(args.out.read_text("utf-8"))["trained_on"]
        args.fold_rankers.mkdir(parents=True, exist_ok=True)
        split = splits()
        for held in sorted(
            {c["name"] for c in load_corpora() if c.get("split") in ("tune", "tune2")}
        ):
            model = train([r for r in rows if r.home != held], meta["l2"], meta["loss"])
            out = fold_ranker(args.fold_rankers, held, split)
            out.write_text(model.to_json({**meta, "without": held}) + "\n", "utf-8")
            print(f"wrote {out}")
        written = {r.home for r in rows if split.get(r.home, WRITTEN) == WRITTEN}
        for fold in sorted({fold_of(r) for r in rows if r.home in written}):
            homes = sorted(h for h in written if home_fold(h) == fold)
            model = train([r for r in rows if fold_of(r) != fold], meta["l2"], meta["loss"])
            out = fold_ranker(args.fold_rankers, homes[0], split)
            out.write_text(model.to_json({**meta, "without": homes}) + "\n", "utf-8")
            print(f"wrote {out} ({len(homes)} written code bases held out)")
        return 0
    if args.l2 is not None:  # chosen earlier: cross-validate that setting alone, for the card
        l2, loss = args.l2, args.loss
        table = {
            "fused order": metrics([first_rank(r.fused, r.y) for r in rows]),
            f"{loss}, L2 {l2}": metrics(cross_validate(rows, l2, loss)),
        }
    else:
        (l2, loss), table = select(rows)
    model = train(rows, l2, loss)
    questions = dict(sorted(Counter(r.home for r in rows).items()))
    files = " ".join(relative(p) for p in args.rows)
    chosen = f" --loss {loss} --l2 {l2}" if args.l2 is not None else ""
    command = f"python -m coderag_training.fit.ranker {files}{chosen}"
    # the rows are derived: the card also pins what they were made from
    asked = [QUESTIONS / "written" / f"{home}.jsonl" for home in questions]
    asked += [QUESTIONS / f"{home}.jsonl" for home in questions]
    pinned = [*args.rows, CORPORA_FILE, MINING_FILE, *(p for p in asked if p.is_file())]
    split = splits()
    trained_on = {
        "split": "+".join(sorted({split.get(home, WRITTEN) for home in questions})),
        "questions": questions,
        "l2": l2,
        "doc_question_weight": 0.0,
        "loss": loss,
        "selected_by": f"{FOLDS}-fold cross-validation grouped by code base, MRR@10",
        "command": command,
    }
    args.out.write_text(model.to_json(trained_on) + "\n", "utf-8")
    cards.write_card(
        args.out,
        command=command,
        inputs=pinned,
        code_bases=sorted(questions),
        questions=questions,
        steps=None,
        seconds=time.perf_counter() - started,
        held_out={"cross-validated (grouped by code base)": table.get(f"{loss}, L2 {l2}", {})},
        extra={"selection": table, "features": model.weights.size},
        notes="Frozen splits (test, test2, wtest) are measured by bench/retrieval.py and "
        "bench/written_retrieval.py with this ranker; docs/BENCHMARKS.md has the figures.",
    )
    print(f"{loss}, L2 {l2}: wrote {args.out} and its card")
    return 0


if __name__ == "__main__":
    sys.exit(main())
