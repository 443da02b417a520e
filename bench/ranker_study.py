"""Studies of the learned ranker on candidate rows (``--dump-features`` files): what it gains
over the fused order per corpus, against gradient-boosted trees, adapted to a code base's own
doc comments, and which features favour its misses. The ranker itself is fitted by
``python -m coderag_training.fit.ranker``.

    python -m bench.ranker_study F --compare-shipped | --compare-models | --own-docs DOC_F
    python -m bench.ranker_study F --explain-misses
    python -m bench.ranker_study F [F ...] --folds 10 [--shipped RANKER_JSON ...]

Leave-one-corpus-out (``--folds``: folds grouped by code base) throughout: each corpus is scored by
a model that never saw it. No frozen split is read here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from coderag_retriever import learned  # noqa: E402
from coderag_retriever.learned import FEATURES, Ranker, parse  # noqa: E402
from coderag_training.fit.ranker import (  # noqa: E402
    WRITTEN,
    Row,
    Scorer,
    first_rank,
    held_out_ranks,
    load_rows,
    metrics,
    splits,
)
from coderag_training.fit.ranker import train as fit_rows  # noqa: E402
from coderag_training.pins import relative  # noqa: E402
from coderag_training.ranker import fit, fit_listwise  # noqa: E402

SHIPPED = HERE.parent / "services" / "retriever" / "coderag_retriever" / "ranker.json"
"""Where the shipped ranker lives."""


def is_doc(row: dict) -> bool:
    """Whether a row comes from a generated question: a doc comment's first sentence or a test's
    name (``bench/docquestions.py``, ``bench/mine.py``), never held out."""
    return "-doc-" in row["id"] or "-test-" in row["id"]


def held_out(rows: list[dict]) -> list[str]:
    """The corpora with written questions: each is held out in turn."""
    return sorted({home(r) for r in rows if not is_doc(r)})


def home(row: dict) -> str:
    """The tuning corpus a row belongs to (a doc-blanked copy counts as its original)."""
    return row["corpus"].removesuffix("-nodoc")


def load(path: Path) -> list[dict]:
    """Questions with their candidates' features and labels."""
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    for r in rows:
        r["x"] = np.array(r["x"], dtype=np.float64).reshape(len(r["y"]), -1)
        r["y"] = np.array(r["y"], dtype=np.float64)
    return rows


def stack(rows: list[dict], doc_weight: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All candidates of the questions as one design matrix, labels and row weights."""
    rows = [r for r in rows if doc_weight > 0 or not is_doc(r)]
    weights = [np.full(len(r["y"]), doc_weight if is_doc(r) else 1.0) for r in rows]
    return (
        np.vstack([r["x"] for r in rows]),
        np.concatenate([r["y"] for r in rows]),
        np.concatenate(weights),
    )


def train(rows: list[dict], l2: float, doc_weight: float, method: str) -> Ranker:
    """Fit on the rows."""
    if method == "listwise":
        kept = [r for r in rows if doc_weight > 0 or not is_doc(r)]
        weights = [doc_weight if is_doc(r) else 1.0 for r in kept]
        return fit_listwise([(r["x"], r["y"]) for r in kept], l2=l2, weight=weights)
    x, y, w = stack(rows, doc_weight)
    return fit(x, y, l2=l2, weight=w)


def compare_shipped(rows: list[dict]) -> None:
    """Print, per corpus, R@1 / R@5 / MRR@10 of the shipped ranker (in sample on the corpora it
    was trained on), of the fused order, and of the shipped recipe trained on the other
    corpora; and the totals over the corpora the shipped ranker never saw."""
    shipped = parse(SHIPPED.read_text("utf-8"))
    meta = json.loads(SHIPPED.read_text("utf-8"))["trained_on"]
    seen = {home({"corpus": c}) for c in meta["questions"]}
    fmt = "{R@1:.2f} / {R@5:.2f} / {MRR@10:.2f}".format
    print(
        "| held-out corpus | n | candidates (median) | gold among them | shipped | fused | "
        "recipe trained on the others |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    unseen: dict[str, list[int | None]] = defaultdict(list)
    for corpus in sorted({home(r) for r in rows}):
        test = [r for r in rows if home(r) == corpus]
        fold = train([r for r in rows if home(r) != corpus], meta["l2"], 0.0, meta["loss"])
        got = {
            "shipped": [first_rank(shipped.score(r["x"]), r["y"]) for r in test],
            "fused": [first_rank(np.array(r["fused"]), r["y"]) for r in test],
            "fold": [first_rank(fold.score(r["x"]), r["y"]) for r in test],
        }
        if corpus not in seen:
            for k, v in got.items():
                unseen[k] += v
        note = " (shipped: in sample)" if corpus in seen else ""
        pool = sum(r["y"].sum() > 0 for r in test) / len(test)
        size = int(np.median([len(r["y"]) for r in test]))
        cells = " | ".join(fmt(**metrics(v)) for v in got.values())
        print(f"| {corpus}{note} | {len(test)} | {size} | {pool:.2f} | {cells} |")
    if unseen:
        cells = " | ".join(fmt(**metrics(v)) for v in unseen.values())
        print(f"| corpora the shipped ranker never saw | {len(unseen['fold'])} | | | {cells} |")


BOOSTED = (
    {"max_depth": 2, "learning_rate": 0.05, "max_iter": 300, "min_samples_leaf": 100},
    {"max_depth": 3, "learning_rate": 0.05, "max_iter": 200, "min_samples_leaf": 50},
    {"max_depth": 4, "learning_rate": 0.03, "max_iter": 300, "min_samples_leaf": 100},
)
"""Gradient-boosted trees tried against the logistic ranker (scikit-learn's defaults else)."""

OWN_DOC_WEIGHTS = (0.1, 0.3, 1.0, 3.0)
"""Weights of a corpus's own doc-comment questions tried when adapting to it."""


def _fmt(ranks: list[int | None]) -> str:
    return "{R@1:.2f} / {R@5:.2f} / {MRR@10:.2f}".format(**metrics(ranks))


def _row(label: object, per: dict[str, list[int | None]]) -> str:
    """A table row: all held-out corpora together, then each."""
    everything = [r for ranks in per.values() for r in ranks]
    return f"| {label} | {_fmt(everything)} | " + " | ".join(_fmt(v) for v in per.values()) + " |"


def compare_models(rows: list[dict], doc_weight: float = 0.0) -> None:
    """Leave-one-corpus-out: the shipped recipe (logistic) against gradient-boosted trees over the
    same features, per held-out corpus; generated questions' rows weigh ``doc_weight``."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    meta = json.loads(SHIPPED.read_text("utf-8"))["trained_on"]
    corpora = held_out(rows)

    def boosted(params: dict):
        def fit_on(train_rows: list[dict]):
            x, y, w = stack(train_rows, doc_weight)
            model = HistGradientBoostingClassifier(**params, random_state=0).fit(x, y, w)
            return lambda z: model.predict_proba(z)[:, 1]

        return fit_on

    models = {
        "logistic (shipped recipe)": lambda t: train(t, meta["l2"], doc_weight, meta["loss"]).score
    }
    models |= {
        f"boosted: depth {p['max_depth']}, rate {p['learning_rate']}, {p['max_iter']} trees, "
        f"leaf >= {p['min_samples_leaf']}": boosted(p)
        for p in BOOSTED
    }
    print("| model | all | " + " | ".join(corpora) + " |")
    print("| --- | --- |" + " --- |" * len(corpora))
    for label, fit_on in models.items():
        per = {}
        for corpus in corpora:
            score = fit_on([r for r in rows if home(r) != corpus])
            per[corpus] = [
                first_rank(score(r["x"]), r["y"])
                for r in rows
                if home(r) == corpus and not is_doc(r)
            ]
        print(_row(label, per))


def explain_misses(rows: list[dict]) -> None:
    """Leave-one-corpus-out with the shipped recipe: where the gold unit ranks when it is not
    first, and for each feature the share of those misses in which the unit ranked first scores
    higher than the gold one (ranks are inverted, so higher is better for every feature)."""
    meta = json.loads(SHIPPED.read_text("utf-8"))["trained_on"]
    right, gaps, where = 0, [], []
    for corpus in held_out(rows):
        model = train([r for r in rows if home(r) != corpus], meta["l2"], 0.0, meta["loss"])
        for r in rows:
            if home(r) != corpus or is_doc(r) or r["y"].sum() == 0:
                continue
            order = np.argsort(-model.score(r["x"]), kind="stable")
            gold = int(np.nonzero(r["y"][order] > 0)[0][0])
            if gold == 0:
                right += 1
                continue
            where.append(gold + 1)
            gaps.append(r["x"][order[0]] - r["x"][order[gold]])
    d = np.array(gaps)
    print(f"gold first: {right}; lower: {len(where)}, of which at ranks 2-5: "
          f"{sum(2 <= w <= 5 for w in where)}\n")  # fmt: skip
    print("| feature | misses where the first unit scores higher | lower |")
    print("| --- | --- | --- |")
    for i in np.argsort(-(d > 0).mean(0)):
        print(f"| {FEATURES[i]} | {(d[:, i] > 0).mean():.2f} | {(d[:, i] < 0).mean():.2f} |")


def adapt_to_own_docs(rows: list[dict], docs: list[dict]) -> None:
    """The repository teaching its own ranker: for each corpus with doc-comment questions, the
    shipped recipe trained on the other corpora's written questions plus this corpus's own
    doc questions at a weight, scored on this corpus's written questions."""
    meta = json.loads(SHIPPED.read_text("utf-8"))["trained_on"]
    corpora = sorted({home(r) for r in docs})
    print("| own doc-question weight | all | " + " | ".join(corpora) + " |")
    print("| --- | --- |" + " --- |" * len(corpora))
    for weight in (0.0, *OWN_DOC_WEIGHTS):
        per = {}
        for corpus in corpora:
            own = [r for r in docs if home(r) == corpus] if weight else []
            model = train([r for r in rows if home(r) != corpus] + own, meta["l2"], weight,
                          meta["loss"])  # fmt: skip
            test = [r for r in rows if home(r) == corpus]
            per[corpus] = [first_rank(model.score(r["x"]), r["y"]) for r in test]
        print(_row(weight, per))


ISSUE_44_FEATURES = ("body_coverage", "declaration", "declaration_asked")
"""The features issue 44 added: the table's linear and tree rows before its last go without
them, as they were measured before the three existed."""

POINTWISE_L2 = (0.1, 1.0, 10.0)
"""L2 strengths of the pointwise rows."""

TREES = BOOSTED[1]
"""The trees' row: depth 3, 200 iterations (``--compare-models``'s second setting)."""


def only(rows: list[Row], names: tuple[str, ...]) -> list[Row]:
    """The rows with only the named features' columns, in that order."""
    cols = [FEATURES.index(n) for n in names]
    return [replace(r, x=r.x[:, cols]) for r in rows]


def shipped_ranker(path: Path) -> tuple[Ranker, tuple[str, ...], frozenset[str], str]:
    """The ranker at ``path``, the features it names, the code bases it was trained on and a
    label; one of this version's features loads through ``learned.load`` (checked against its
    card), one of an earlier version's is read as it stands and scores its own columns."""
    raw = json.loads(path.read_text("utf-8"))
    names = tuple(raw["features"])
    if names == FEATURES:
        model = learned.load(str(path))
    else:
        model = Ranker(
            np.array(raw["mean"]), np.array(raw["scale"]), np.array(raw["weights"]), raw["bias"]
        )
    meta = raw["trained_on"]
    seen = frozenset(c.removesuffix("-nodoc") for c in meta["questions"])
    label = (
        f"{relative(path)}: {meta['loss']}, L2 {meta['l2']}, {len(names)} features, fitted on "
        f"{meta['split']} ({sum(meta['questions'].values())} questions)"
    )
    return model, names, seen, label


def _linear(l2: float, loss: str) -> Callable[[list[Row]], Scorer]:
    """Fitting the learned ranker as ``coderag_training.fit.ranker`` does, with this setting."""

    def fit_on(rows: list[Row]) -> Scorer:
        return fit_rows(rows, l2, loss).score

    return fit_on


def _trees(rows: list[Row]) -> Scorer:
    from sklearn.ensemble import HistGradientBoostingClassifier

    x, y = np.vstack([r.x for r in rows]), np.concatenate([r.y for r in rows])
    model = HistGradientBoostingClassifier(**TREES, random_state=0).fit(x, y)
    return lambda z: model.predict_proba(z)[:, 1]


def folds_table(paths: list[Path], folds: int, rankers: list[Path]) -> None:
    """The cross-validated table of docs/BENCHMARKS.md: ``folds`` folds grouped by code base
    (each question scored by a fit that never saw its code base), R@1 / R@5 / MRR@10 on the
    written and the tuning questions apart, for the fused order, the shipped ranker (in sample
    where it saw the code base), pointwise and listwise fits and trees."""
    started = time.perf_counter()
    rows = load_rows(paths)
    if rows and rows[0].x.shape[1] != len(FEATURES):
        raise SystemExit(f"rows of {rows[0].x.shape[1]} features; this version has {len(FEATURES)}")
    split = splits()
    groups = {
        "written": [i for i, r in enumerate(rows) if split.get(r.home, WRITTEN) == WRITTEN],
        "tuning": [i for i, r in enumerate(rows) if split.get(r.home, "").startswith("tune")],
    }
    before = tuple(f for f in FEATURES if f not in ISSUE_44_FEATURES)
    out: list[str] = []

    def put(label: str, ranks: list[int | None], seen: frozenset[str] = frozenset()) -> None:
        cells = []
        for held in groups.values():
            inside = sum(rows[i].home in seen for i in held)
            note = "" if not inside else f" (in sample: {inside} of {len(held)})"
            cells.append(_fmt([ranks[i] for i in held]) + note)
        out.append(f"| {label} | " + " | ".join(cells) + " |")
        print(f"{label}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

    # the candidates come in the fused order: the first gold's place in the list
    put("fused order (no ranker)", [first_rank(-np.arange(len(r.y)), r.y) for r in rows])
    for path in rankers:
        model, names, seen, label = shipped_ranker(path)
        mine = only(rows, names)
        put(f"shipped ranker ({label})", [first_rank(model.score(r.x), r.y) for r in mine], seen)
    old = only(rows, before)
    n = f"{len(before)} features (without {', '.join(ISSUE_44_FEATURES)})"
    for l2 in POINTWISE_L2:
        put(f"pointwise, L2 {l2}, {n}", held_out_ranks(old, _linear(l2, "pointwise"), folds))
    put(f"listwise, L2 1.0, {n}", held_out_ranks(old, _linear(1.0, "listwise"), folds))
    depth, iters = TREES["max_depth"], TREES["max_iter"]
    put(
        f"gradient-boosted trees (depth {depth}, {iters} iterations), {n}",
        held_out_ranks(old, _trees, folds),
    )
    put(
        f"listwise, L2 10.0, all {len(FEATURES)} features (the shipped recipe)",
        held_out_ranks(rows, _linear(10.0, "listwise"), folds),
    )
    files = " ".join(relative(p) for p in paths)
    extra = "" if rankers == [SHIPPED] else "".join(f" --shipped {relative(p)}" for p in rankers)
    print(f"python -m bench.ranker_study {files} --folds {folds}{extra}\n")
    print(
        f"{folds} folds grouped by code base; R@1 / R@5 / MRR@10; "
        f"{time.perf_counter() - started:.0f} s\n"
    )
    sizes = {k: len(v) for k, v in groups.items()}
    print(f"| ranker | written ({sizes['written']}) | tuning ({sizes['tuning']}) |")
    print("| --- | --- | --- |")
    print("\n".join(out))


def main() -> int:
    """Run the study named on the command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("features", type=Path, nargs="+", help="--dump-features files")
    ap.add_argument(
        "--folds",
        type=int,
        metavar="N",
        help="instead: N-fold cross-validation grouped by code base, written and tuning "
        "questions apart (docs/BENCHMARKS.md's table of rankers)",
    )
    ap.add_argument(
        "--shipped",
        type=Path,
        action="append",
        metavar="RANKER_JSON",
        help="with --folds: score this ranker file instead of the shipped one (repeatable; an "
        "earlier version's scores the features it names)",
    )
    ap.add_argument(
        "--compare-shipped",
        action="store_true",
        help="instead: per corpus, the shipped ranker against its recipe trained on the others",
    )
    ap.add_argument(
        "--compare-models",
        action="store_true",
        help="instead: leave-one-corpus-out, the logistic ranker against gradient-boosted trees",
    )
    ap.add_argument(
        "--own-docs",
        type=Path,
        metavar="DOC_FEATURES",
        help="instead: adapt to each corpus with its own doc-comment questions' rows, read from "
        "this dump (retrieval.py --doc-questions N), and score on its written questions",
    )
    ap.add_argument(
        "--explain-misses",
        action="store_true",
        help="instead: leave-one-corpus-out, where rank 1 is wrong, which features favour it",
    )
    ap.add_argument(
        "--doc-weight",
        type=float,
        default=0.0,
        help="with --compare-models: the weight of generated questions' rows (0: left out)",
    )
    args = ap.parse_args()
    if args.folds:
        folds_table(args.features, args.folds, args.shipped or [SHIPPED])
        return 0
    rows = [r for path in args.features for r in load(path) if len(r["y"])]
    if args.compare_models:
        compare_models(rows, args.doc_weight)
        return 0
    if args.own_docs:
        docs = [r for r in load(args.own_docs) if len(r["y"]) and is_doc(r)]
        adapt_to_own_docs([r for r in rows if not is_doc(r)], docs)
        return 0
    if args.explain_misses:
        explain_misses(rows)
        return 0
    if args.compare_shipped:
        compare_shipped([r for r in rows if not is_doc(r)])
        return 0
    ap.error(
        "name a study (--compare-shipped, --compare-models, --own-docs, --explain-misses); "
        "the ranker is fitted by python -m coderag_training.fit.ranker"
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
