"""Fit the unsafe-request rule (G5, issue 31 lever 5) on questions written for it.

    python -m coderag_training.fit.unsafe [--write]

A logistic regression on the shipped encoders' query vectors (MiniLM's, e5-small's, or both
side by side), or on e5-small's vector beside the question's terms (``vector2+terms``: the
product's ``coderag_retriever.unsafe.terms``, letter n-grams 2 to 4 of each word and words with
their pairs, kept when at least ``MIN_DF`` fitting questions hold them, weighted 1 + ln count
times the smoothed idf and L2-normalised per family, by the product's own ``weighted``). It is
fitted on ``bench/questions/unsafe/train.jsonl`` (400 questions), ``train2.jsonl`` (800,
written for issue 41: indirect requests and their benign look-alikes), ``train3.jsonl`` (460,
the same kind, 57% Chinese: requests dressed as call-chain, history, configuration and testing
questions), ``tune.jsonl`` (60) and
the retrieval benchmark's questions on the tuning code bases (benign: ordinary questions must
not be declined), with the written program's questions on its training code bases and the
who/when questions (benign too). The features (``RECIPES``), the regularisation and the
threshold (the most unsafe requests declined with at most ``MAX_BENIGN`` of the benign
security questions and ``MAX_ORDINARY`` of the ordinary ones declined) are chosen on
out-of-fold probabilities over those; each fold's vocabulary and idf come from its own fitting
rows. ``test.jsonl`` (60, written apart) is read once, for the report: the hand-written rules
alone, the classifier alone and both together (declined when either declines: the shipped
check), and how many of the frozen code bases' questions it declines, each scored by the
shipped model's own ``p_unsafe``. ``--write`` saves the chosen model, fitted on all of them
(its floats rounded to 6 significant digits), where the retriever loads it
(``coderag_retriever/unsafe.json``), and its card (``unsafe.card.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from coderag.settings import get_settings
from coderag_embedder.queries import embed_queries
from coderag_generator.refusal import is_unsafe as rules_decline
from coderag_retriever import unsafe as shipped
from coderag_training import cards, pins

Row = dict[str, Any]

MAX_BENIGN = 0.05
"""Most benign security questions the chosen threshold may decline (out of fold)."""

MAX_ORDINARY = 0.005
"""Most ordinary code questions (the retrieval benchmark's) it may decline (out of fold)."""

C_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
"""Inverse regularisation strengths tried."""

SPACES = ("vector", "vector2", "both")
"""Question vectors tried: MiniLM's, e5-small's, both side by side."""

TERMS = "vector2+terms"
"""e5-small's vector beside the question's TF-IDF terms (``coderag_retriever.unsafe.terms``)."""

RECIPES = (*SPACES, TERMS)
"""Every feature set tried, in the order a tie goes to (after the weaker regularisation)."""

MIN_DF = 2
"""Fewest fitting questions a term must occur in to enter the vocabulary."""

MAX_BYTES = 4 * 2**20
"""Largest model file written: it is read at every retriever start and lives in the repository."""

UNSAFE = pins.QUESTIONS / "unsafe"
"""The labelled unsafe and benign sets (train, tune, test) and their README."""


def unsafe_set(name: str) -> list[Row]:
    """The questions of one labelled set."""
    return pins.read_jsonl(UNSAFE / f"{name}.jsonl")


def ordinary_files(splits: tuple[str, ...]) -> list[Path]:
    """The benchmark's question files of the code bases of ``splits`` and the evidence set of
    the same side: what users ask all day, which must not be declined."""
    names = [c["name"] for c in pins.load_corpora() if c["split"] in splits]
    side = "test" if "test" in splits else "tune"
    return [
        *(pins.QUESTIONS / f"{n}.jsonl" for n in names),
        pins.QUESTIONS / "evidence" / f"{side}.jsonl",
    ]


def written_files() -> list[Path]:
    """The written program's question files on its training code bases (``mined`` and
    ``wtrain``; never ``wtest`` nor ``harmless``) and the who/when benchmark's: call chains and
    who-changed questions about any code, which the rule fitted without them declined (issue
    41)."""
    entries = pins.load_mining() + pins.load_written()
    training = {e["name"] for e in entries if e.get("split") in ("mined", "wtrain")}
    paths = [p for p in sorted((pins.QUESTIONS / "written").glob("*.jsonl")) if p.stem in training]
    return [*paths, pins.QUESTIONS / "history.jsonl"]


def benign(paths: list[Path]) -> list[Row]:
    """The questions of these files as ordinary, benign ones."""
    return [
        {"query": row["query"], "unsafe": False, "lang": "", "kind": "ordinary"}
        for path in paths
        for row in pins.read_jsonl(path)
    ]


@dataclass
class Inputs:
    """What one fit reads: the rows it is fitted on, the held-out ones, and their files."""

    sets: dict[str, list[Row]]
    fitting: list[Row]
    frozen: list[Row]
    files: list[Path]
    code_bases: list[str]


SHIPPED_SETS = ("train", "train2", "train3", "tune")
"""The labelled sets the shipped model is fitted on. ``train4.jsonl`` (560 pairs that name real
code of 17 training code bases) is fitted on only with ``--also train4``: the model it gave tied
the shipped one on issue 41's frozen set (65 of 76 unsafe declined either way) and declined 3
of the frozen code bases' 485 ordinary questions against none (docs/BENCHMARKS.md)."""


def gather(also: tuple[str, ...] = ()) -> Inputs:
    """Every question the fit and its report read (no vectors yet); ``also``: more labelled
    sets to fit on."""
    fitted_sets = (*SHIPPED_SETS, *also)
    sets = {name: unsafe_set(name) for name in (*fitted_sets, "test")}
    tuning, frozen = ordinary_files(("tune", "tune2")), ordinary_files(("test", "test2"))
    written = written_files()
    pinned = [pins.CORPORA_FILE, pins.MINING_FILE, *pins.written_files()]
    return Inputs(
        sets=sets,
        fitting=[q for name in fitted_sets for q in sets[name]] + benign(tuning) + benign(written),
        frozen=benign(frozen),
        files=[*(UNSAFE / f"{n}.jsonl" for n in sets), *tuning, *written, *frozen, *pinned],
        # the evidence set asks about the tuning code bases, the who/when set about a made-up one
        code_bases=[p.stem for p in [*tuning[:-1], *written[:-1]]],
    )


def vectors(space: str, queries: list[str]) -> np.ndarray:
    """The queries' vectors in one space."""
    out = embed_queries(space, queries)
    if out is None:
        raise SystemExit(f"no encoder feeds {space}: check CODERAG_EMBED_MODEL_2")
    return np.asarray(out, dtype=np.float32)


def fit(x: Any, y: np.ndarray, c: float) -> Any:
    """A balanced logistic regression (scikit-learn's, untyped) on dense or sparse rows."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, class_weight="balanced", max_iter=3000).fit(x, y)


def sig(x: float) -> float:
    """``x`` to 6 significant digits, as the model file stores it."""
    return float(f"{x:.6g}")


def vocabulary(bags: list[dict[str, int]]) -> tuple[list[str], list[float]]:
    """The terms at least ``MIN_DF`` of these questions hold, and their smoothed idf
    (ln((1 + n) / (1 + df)) + 1, rounded as stored so the fit sees what the product uses)."""
    df = Counter(t for bag in bags for t in bag)
    kept = sorted(t for t, d in df.items() if d >= MIN_DF)
    n = len(bags)
    return kept, [sig(math.log((1 + n) / (1 + df[t])) + 1.0) for t in kept]


def with_terms(
    vecs: np.ndarray, bags: list[dict[str, int]], vocab: list[str], idf: list[float]
) -> Any:
    """The questions' vectors beside their term features (a scipy CSR matrix), the terms
    weighted by the product's ``weighted``."""
    from scipy import sparse

    index = {t: i for i, t in enumerate(vocab)}
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for r, bag in enumerate(bags):
        x = shipped.weighted(bag, index, idf)
        rows += [r] * len(x)
        cols += list(x)
        vals += list(x.values())
    terms = sparse.csr_matrix((vals, (rows, cols)), shape=(len(bags), len(vocab)))
    return sparse.hstack([sparse.csr_matrix(vecs.astype(np.float64)), terms], format="csr")


Fold = tuple[Any, Any, np.ndarray, np.ndarray]
"""One fold's fitting rows' features, its held rows' features, and both rows' positions."""


def splits(y: np.ndarray, folds: int = 5) -> list[tuple[np.ndarray, np.ndarray]]:
    """The stratified, seeded folds every recipe is scored on (fitting rows, held rows)."""
    from sklearn.model_selection import StratifiedKFold

    kfold = StratifiedKFold(folds, shuffle=True, random_state=0)
    return list(kfold.split(np.zeros((len(y), 1)), y))


def folds_of(
    recipe: str,
    x: dict[str, np.ndarray],
    bags: list[dict[str, int]],
    parts: list[tuple[np.ndarray, np.ndarray]],
) -> list[Fold]:
    """Each fold's features under one recipe; a terms recipe's vocabulary and idf come from the
    fold's fitting rows alone (the held rows' terms never choose them)."""
    if recipe in SPACES:
        return [(x[recipe][f], x[recipe][h], f, h) for f, h in parts]
    out = []
    for f, h in parts:
        vocab, idf = vocabulary([bags[i] for i in f])
        space = x[space_of(recipe)]
        fit_x = with_terms(space[f], [bags[i] for i in f], vocab, idf)
        out.append((fit_x, with_terms(space[h], [bags[i] for i in h], vocab, idf), f, h))
    return out


def space_of(recipe: str) -> str:
    """The vector space a recipe reads."""
    return recipe.removesuffix("+terms")


def threshold(p: np.ndarray, y: np.ndarray, plain: np.ndarray) -> float:
    """The lowest probability that declines at most ``MAX_BENIGN`` of the benign security
    questions and at most ``MAX_ORDINARY`` of the ordinary ones (``plain``)."""

    def cut(scores: np.ndarray, share: float) -> float:
        ranked = np.sort(scores)[::-1]
        allowed = int(share * len(ranked))
        return float(ranked[allowed] + 1e-6) if allowed < len(ranked) else 0.0

    return max(cut(p[(y == 0) & ~plain], MAX_BENIGN), cut(p[plain], MAX_ORDINARY))


def out_of_fold(folds: list[Fold], y: np.ndarray, c: float) -> np.ndarray:
    """Each question's probability from a model fitted without its fold."""
    p = np.zeros(len(y))
    for fit_x, held_x, fit_idx, held in folds:
        p[held] = fit(fit_x, y[fit_idx], c).predict_proba(held_x)[:, 1]
    return p


def declined(rows: list[Row], verdicts: list[bool]) -> dict[str, dict[str, float]]:
    """Per language and for all: unsafe requests declined and benign questions declined."""
    out = {}
    for lang in ("all", "en", "zh"):
        pairs = zip(rows, verdicts, strict=True)
        part = [(r, v) for r, v in pairs if lang == "all" or r["lang"] == lang]
        bad = [v for r, v in part if r["unsafe"]]
        good = [v for r, v in part if not r["unsafe"]]
        out[lang] = {
            "unsafe": len(bad),
            "unsafe_declined": round(sum(bad) / max(1, len(bad)), 3),
            "benign": len(good),
            "benign_declined": round(sum(good) / max(1, len(good)), 3),
        }
    return out


def table(figures: dict[str, dict[str, float]]) -> list[str]:
    """``declined``'s figures as a markdown table."""
    lines = ["| questions | unsafe declined | benign declined |", "| --- | --- | --- |"]
    for lang, f in figures.items():
        lines.append(
            f"| {lang} ({f['unsafe']:.0f} + {f['benign']:.0f}) | {f['unsafe_declined']:.2f} "
            f"| {f['benign_declined']:.2f} |"
        )
    return lines


def main(argv: list[str]) -> int:
    """Choose the features, regularisation and threshold out of fold, report, write."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--write", action="store_true", help="save the chosen model for the retriever")
    ap.add_argument(
        "--also", action="append", default=[], help="fit on this labelled set too (train4)"
    )
    args = ap.parse_args(argv)
    started = time.monotonic()
    data = gather(tuple(args.also))
    fitting, frozen, test = data.fitting, data.frozen, data.sets["test"]
    plain = np.array([q["kind"] == "ordinary" for q in fitting])
    y = np.array([int(q["unsafe"]) for q in fitting])
    x: dict[str, np.ndarray] = {}
    x_test: dict[str, np.ndarray] = {}
    x_frozen: dict[str, np.ndarray] = {}
    for d, rows in ((x, fitting), (x_test, test), (x_frozen, frozen)):
        for sp in ("vector", "vector2"):
            d[sp] = vectors(sp, [q["query"] for q in rows])
        d["both"] = np.hstack([d["vector"], d["vector2"]])
    bags = [shipped.terms(q["query"]) for q in fitting]
    parts = splits(y)
    scores = {}
    for recipe in RECIPES:
        folds = folds_of(recipe, x, bags, parts)
        for c in C_GRID:
            p = out_of_fold(folds, y, c)
            t = threshold(p, y, plain)
            scores[recipe, c] = (float(np.mean(p[y == 1] >= t)), t)
            print(f"{recipe} C {c}: unsafe declined out of fold {scores[recipe, c][0]:.2f} "
                  f"at threshold {t:.3f}", flush=True)  # fmt: skip
    # ties go to the stronger regularisation, then to the simpler recipe
    recipe, c = max(scores, key=lambda k: (scores[k][0], -C_GRID.index(k[1]), -RECIPES.index(k[0])))
    t = sig(scores[recipe, c][1])
    print(
        f"chosen out of fold on {' + '.join(n for n in data.sets if n != 'test')} + {plain.sum()} "
        f"ordinary questions ({len(y)}): {recipe}, C {c}, threshold {t:.3f}"
    )
    space = space_of(recipe)
    vocab, idf = vocabulary(bags) if recipe == TERMS else ([], [])
    features = with_terms(x[space], bags, vocab, idf) if recipe == TERMS else x[space]
    fitted_lr = fit(features, y, c)
    coef = [sig(float(w)) for w in fitted_lr.coef_[0]]
    dims = x[space].shape[1]
    saved = shipped.Model(
        space=space,
        encoder=get_settings().embed_model_2 if space != "vector" else "minilm",
        weights=coef[:dims],
        bias=sig(float(fitted_lr.intercept_[0])),
        threshold=t,
        fitted_on="bench/questions/unsafe/"
        + " + ".join(f"{n}.jsonl" for n in data.sets if n != "test")
        + " "
        "+ the tuning code bases' "
        f"questions + the written training questions and who/when questions ({len(y)}); "
        f"{recipe}"
        + (f" ({len(vocab)} terms in at least {MIN_DF} questions)" if vocab else "")
        + f", C {c} and the threshold chosen out of fold",
        vocabulary=vocab,
        idf=idf,
        term_weights=coef[dims:],
    )
    if vocab:
        print(f"vocabulary: {len(vocab)} terms in at least {MIN_DF} fitting questions")

    def verdicts(rows: list[Row], vecs: np.ndarray) -> list[bool]:
        # the model as stored (rounded), scored as the retriever scores it
        return [
            saved.p_unsafe(v.astype(np.float64), q["query"]) >= saved.threshold
            for q, v in zip(rows, vecs, strict=True)
        ]

    learned = verdicts(test, x_test[space])
    rules = [rules_decline(q["query"]) for q in test]
    held_out: dict[str, Any] = {}
    for label, said in (
        ("rules", rules),
        ("classifier", learned),
        ("rules or classifier", [r or m for r, m in zip(rules, learned, strict=True)]),
    ):
        held_out[f"unsafe/test.jsonl, {label}"] = declined(test, said)
        print(f"\ntest, {label}:")
        print("\n".join(table(held_out[f"unsafe/test.jsonl, {label}"])))
    count = sum(verdicts(frozen, x_frozen[space]))
    held_out["frozen code bases' questions declined"] = {"declined": count, "of": len(frozen)}
    print(f"\nordinary questions of the frozen code bases declined: {count} of {len(frozen)}")
    # measured as coderag.fitted.dump writes it (one-space indent, a final newline)
    size = len((json.dumps(asdict(saved), indent=1) + "\n").encode("utf-8"))
    print(f"model file: {size} bytes")
    if args.write and size > MAX_BYTES:
        raise SystemExit(f"the model would be {size} bytes, over {MAX_BYTES}: not written")
    if args.write:
        shipped.save(saved, shipped.MODEL_FILE)
        from sklearn.metrics import log_loss

        cards.write_card(
            shipped.MODEL_FILE,
            command=" ".join(["python -m coderag_training.fit.unsafe", *argv]),
            inputs=data.files,
            code_bases=data.code_bases,
            questions=counts(data),
            steps=int(fitted_lr.n_iter_[0]),
            seconds=time.monotonic() - started,
            loss=[float(log_loss(y, fitted_lr.predict_proba(features)[:, 1]))],
            held_out=held_out,
            extra={
                "recipe": recipe,
                "space": space,
                "terms": len(vocab),
                "min_df": MIN_DF,
                "C": c,
                "threshold": t,
                "out_of_fold_unsafe_declined": scores[recipe, c][0],
                "out_of_fold": {
                    f"{r}, C {k}": {"unsafe_declined": round(v[0], 4), "threshold": round(v[1], 4)}
                    for (r, k), v in scores.items()
                },
                "max_benign": MAX_BENIGN,
                "max_ordinary": MAX_ORDINARY,
            },
            notes="scikit-learn's lbfgs reports no loss per iteration: the loss is the final "
            "in-sample log loss (of the unrounded fit); the held-out figures are the stored, "
            "rounded model's",
        )
        print(f"wrote {shipped.MODEL_FILE} and its card")
    return 0


def counts(data: Inputs) -> dict[str, int]:
    """The card's question counts: fitted on, then held out."""
    ordinary = sum(q["kind"] == "ordinary" for q in data.fitting)
    fitted_sets = {f"unsafe/{n}.jsonl": len(rows) for n, rows in data.sets.items() if n != "test"}
    return {
        **fitted_sets,
        "ordinary, written and who/when (benign)": ordinary,
        "fitted on": len(data.fitting),
        "unsafe/test.jsonl (held out)": len(data.sets["test"]),
        "frozen code bases (held out)": len(data.frozen),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
