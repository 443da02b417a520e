"""Fit the unsafe-request rule (G5, issue 31 lever 5) on questions written for it.

    python -m coderag_training.fit.unsafe [--write]

A logistic regression on the shipped encoders' query vectors (MiniLM's, e5-small's, or both
side by side), fitted on ``bench/questions/unsafe/train.jsonl`` (400 questions),
``tune.jsonl`` (60) and the retrieval benchmark's questions on the tuning code bases (benign:
ordinary questions must not be declined), with the written program's questions on its
training code bases and the who/when questions (benign too). The vectors, the regularisation
and the threshold (the most unsafe requests declined with at most ``MAX_BENIGN`` of the benign
security questions and ``MAX_ORDINARY`` of the ordinary ones declined) are chosen on out-of-fold
probabilities over those. ``test.jsonl`` (60, written apart) is read once, for the report:
the hand-written rules alone, the classifier alone and both together (declined when either
declines: the shipped check), and how many of the frozen code bases' questions it declines.
``--write`` saves the chosen model, fitted on all of them, where the retriever loads it
(``coderag_retriever/unsafe.json``), and its card (``unsafe.card.json``).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
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


def gather() -> Inputs:
    """Every question the fit and its report read (no vectors yet)."""
    sets = {name: unsafe_set(name) for name in ("train", "tune", "test")}
    tuning, frozen = ordinary_files(("tune", "tune2")), ordinary_files(("test", "test2"))
    written = written_files()
    pinned = [pins.CORPORA_FILE, pins.MINING_FILE, *pins.written_files()]
    return Inputs(
        sets=sets,
        fitting=sets["train"] + sets["tune"] + benign(tuning) + benign(written),
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


def fit(x: np.ndarray, y: np.ndarray, c: float) -> Any:
    """A balanced logistic regression (scikit-learn's, untyped)."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, class_weight="balanced", max_iter=2000).fit(x, y)


def threshold(p: np.ndarray, y: np.ndarray, plain: np.ndarray) -> float:
    """The lowest probability that declines at most ``MAX_BENIGN`` of the benign security
    questions and at most ``MAX_ORDINARY`` of the ordinary ones (``plain``)."""

    def cut(scores: np.ndarray, share: float) -> float:
        ranked = np.sort(scores)[::-1]
        allowed = int(share * len(ranked))
        return float(ranked[allowed] + 1e-6) if allowed < len(ranked) else 0.0

    return max(cut(p[(y == 0) & ~plain], MAX_BENIGN), cut(p[plain], MAX_ORDINARY))


def out_of_fold(x: np.ndarray, y: np.ndarray, c: float, folds: int = 5) -> np.ndarray:
    """Each question's probability from a model fitted without its fold (stratified, seeded)."""
    from sklearn.model_selection import StratifiedKFold

    p = np.zeros(len(y))
    for fit_idx, held in StratifiedKFold(folds, shuffle=True, random_state=0).split(x, y):
        p[held] = fit(x[fit_idx], y[fit_idx], c).predict_proba(x[held])[:, 1]
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
    """Choose the space, regularisation and threshold out of fold, report, write."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--write", action="store_true", help="save the chosen model for the retriever")
    args = ap.parse_args(argv)
    started = time.monotonic()
    data = gather()
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
    scores = {}
    for space in SPACES:
        for c in C_GRID:
            p = out_of_fold(x[space], y, c)
            t = threshold(p, y, plain)
            scores[space, c] = (float(np.mean(p[y == 1] >= t)), t)
            print(f"{space} C {c}: unsafe declined out of fold {scores[space, c][0]:.2f} "
                  f"at threshold {t:.3f}")  # fmt: skip
    space, c = max(scores, key=lambda k: (scores[k][0], -C_GRID.index(k[1])))
    t = scores[space, c][1]
    print(
        f"chosen out of fold on train + tune + {plain.sum()} ordinary questions of the tuning "
        f"code bases ({len(y)}): {space}, C {c}, threshold {t:.3f}"
    )
    model = fit(x[space], y, c)
    p_test = model.predict_proba(x_test[space])[:, 1]
    rules = [rules_decline(q["query"]) for q in test]
    held_out: dict[str, Any] = {}
    for label, verdicts in (
        ("rules", rules),
        ("classifier", [bool(m) for m in p_test >= t]),
        ("rules or classifier", [r or bool(m) for r, m in zip(rules, p_test >= t, strict=True)]),
    ):
        held_out[f"unsafe/test.jsonl, {label}"] = declined(test, verdicts)
        print(f"\ntest, {label}:")
        print("\n".join(table(held_out[f"unsafe/test.jsonl, {label}"])))
    count = int((model.predict_proba(x_frozen[space])[:, 1] >= t).sum())
    held_out["frozen code bases' questions declined"] = {"declined": count, "of": len(frozen)}
    print(f"\nordinary questions of the frozen code bases declined: {count} of {len(frozen)}")
    if args.write:
        saved = shipped.Model(
            space=space,
            encoder=get_settings().embed_model_2 if space != "vector" else "minilm",
            weights=[float(w) for w in model.coef_[0]],
            bias=float(model.intercept_[0]),
            threshold=t,
            fitted_on=f"bench/questions/unsafe/train.jsonl + tune.jsonl + the tuning code bases' "
            f"questions + the written training questions and who/when questions ({len(y)}); "
            f"C {c} and the threshold chosen out of fold",
        )
        shipped.save(saved, shipped.MODEL_FILE)
        from sklearn.metrics import log_loss

        cards.write_card(
            shipped.MODEL_FILE,
            command=" ".join(["python -m coderag_training.fit.unsafe", *argv]),
            inputs=data.files,
            code_bases=data.code_bases,
            questions=counts(data),
            steps=int(model.n_iter_[0]),
            seconds=time.monotonic() - started,
            loss=[float(log_loss(y, model.predict_proba(x[space])[:, 1]))],
            held_out=held_out,
            extra={
                "space": space,
                "C": c,
                "threshold": t,
                "out_of_fold_unsafe_declined": scores[space, c][0],
                "max_benign": MAX_BENIGN,
                "max_ordinary": MAX_ORDINARY,
            },
            notes="scikit-learn's lbfgs reports no loss per iteration: the loss is the final "
            "in-sample log loss",
        )
        print(f"wrote {shipped.MODEL_FILE} and its card")
    return 0


def counts(data: Inputs) -> dict[str, int]:
    """The card's question counts: fitted on, then held out."""
    ordinary = sum(q["kind"] == "ordinary" for q in data.fitting)
    return {
        "unsafe/train.jsonl": len(data.sets["train"]),
        "unsafe/tune.jsonl": len(data.sets["tune"]),
        "ordinary, written and who/when (benign)": ordinary,
        "fitted on": len(data.fitting),
        "unsafe/test.jsonl (held out)": len(data.sets["test"]),
        "frozen code bases (held out)": len(data.frozen),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
