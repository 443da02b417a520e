"""Fit the unsafe-request classifier (G5, issue 31 lever 5) on questions written for it.

    python -m bench.train_unsafe [--write]

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
(``coderag_retriever/unsafe.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench.unsafe import load, report  # noqa: E402
from coderag.settings import get_settings  # noqa: E402
from coderag_embedder.queries import embed_queries  # noqa: E402
from coderag_generator.refusal import is_unsafe as rules_decline  # noqa: E402
from coderag_retriever import unsafe as shipped  # noqa: E402

MAX_BENIGN = 0.05
"""Most benign security questions the chosen threshold may decline (out of fold)."""

MAX_ORDINARY = 0.005
"""Most ordinary code questions (the retrieval benchmark's) it may decline (out of fold)."""

CORPORA = HERE / "corpora.json"
"""Which split each benchmark code base belongs to."""

C_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
"""Inverse regularisation strengths tried."""

SPACES = ("vector", "vector2", "both")
"""Question vectors tried: MiniLM's, e5-small's, both side by side."""


def vectors(space: str, queries: list[str]) -> np.ndarray:
    """The queries' vectors in one space."""
    out = embed_queries(space, queries)
    if out is None:
        raise SystemExit(f"no encoder feeds {space}: check CODERAG_EMBED_MODEL_2")
    return np.asarray(out, dtype=np.float32)


def fit(x: np.ndarray, y: np.ndarray, c: float):  # type: ignore[no-untyped-def]
    """A balanced logistic regression."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, class_weight="balanced", max_iter=2000).fit(x, y)


def ordinary(splits: tuple[str, ...]) -> list[dict]:
    """The benchmark's code questions on the code bases of ``splits`` (and the evidence set of
    the same side), as benign questions: what users ask all day must not be declined."""
    names = [c["name"] for c in json.loads(CORPORA.read_text("utf-8")) if c["split"] in splits]
    paths = [HERE / "questions" / f"{n}.jsonl" for n in names]
    side = "test" if "test" in splits else "tune"
    paths.append(HERE / "questions" / "evidence" / f"{side}.jsonl")
    return [
        {"query": json.loads(line)["query"], "unsafe": False, "lang": "", "kind": "ordinary"}
        for path in paths
        for line in path.read_text("utf-8").splitlines()
        if line.strip()
    ]


def written_ordinary() -> list[dict]:
    """The written program's questions on its training code bases (``mined`` and ``wtrain``;
    never ``wtest`` nor ``harmless``) and the who/when benchmark's questions, as benign: call
    chains and who-changed questions about any code, which the rule fitted without them
    declined (issue 41)."""
    from bench.fetch import load_mining, load_written

    training = {
        e["name"] for e in load_mining() + load_written() if e.get("split") in ("mined", "wtrain")
    }
    paths = [p for p in sorted((HERE / "questions" / "written").glob("*.jsonl"))]
    paths = [p for p in paths if p.stem in training]
    paths.append(HERE / "questions" / "history.jsonl")
    return [
        {"query": json.loads(line)["query"], "unsafe": False, "lang": "", "kind": "ordinary"}
        for path in paths
        for line in path.read_text("utf-8").splitlines()
        if line.strip()
    ]


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


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="save the chosen model for the retriever")
    args = ap.parse_args(argv)
    sets = {name: load(name) for name in ("train", "tune", "test")}
    fitting = sets["train"] + sets["tune"] + ordinary(("tune", "tune2")) + written_ordinary()
    plain = np.array([q["kind"] == "ordinary" for q in fitting])
    frozen = ordinary(("test", "test2"))
    y = np.array([int(q["unsafe"]) for q in fitting])
    x = {sp: vectors(sp, [q["query"] for q in fitting]) for sp in ("vector", "vector2")}
    x_test = {sp: vectors(sp, [q["query"] for q in sets["test"]]) for sp in ("vector", "vector2")}
    x_frozen = {sp: vectors(sp, [q["query"] for q in frozen]) for sp in ("vector", "vector2")}
    for d in (x, x_test, x_frozen):
        d["both"] = np.hstack([d["vector"], d["vector2"]])
    scores = {}
    for space in SPACES:
        for c in C_GRID:
            p = out_of_fold(x[space], y, c)
            t = threshold(p, y, plain)
            scores[space, c] = (float(np.mean(p[y == 1] >= t)), t)
            print(
                f"{space} C {c}: unsafe declined out of fold {scores[space, c][0]:.2f} "
                f"at threshold {t:.3f}"
            )
    space, c = max(scores, key=lambda k: (scores[k][0], -C_GRID.index(k[1])))
    t = scores[space, c][1]
    print(
        f"chosen out of fold on train + tune + {plain.sum()} ordinary questions of the tuning "
        f"code bases ({len(y)}): {space}, C {c}, threshold {t:.3f}"
    )
    model = fit(x[space], y, c)
    p = model.predict_proba(x_test[space])[:, 1]
    rules = [rules_decline(q["query"]) for q in sets["test"]]
    for label, declined in (
        ("rules", rules),
        ("classifier", list(p >= t)),
        ("rules or classifier", [r or bool(m) for r, m in zip(rules, p >= t, strict=True)]),
    ):
        rows = [{**q, "declined": bool(d)} for q, d in zip(sets["test"], declined, strict=True)]
        print(f"\ntest, {label}:")
        print("\n".join(report(rows)))
    declined = int((model.predict_proba(x_frozen[space])[:, 1] >= t).sum())
    print(f"\nordinary questions of the frozen code bases declined: {declined} of {len(frozen)}")
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
        shipped.save(saved)
        print(f"wrote {shipped.MODEL_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
