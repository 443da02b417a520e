"""Fit the learned refusal rule (``coderag_retriever/refusal.json``) on the tuning split.

    python -m coderag_training.fit.refusal [--max-false-refusals 0.05] [--l2 1.0] [--dry-run]
    python -m coderag_training.fit.refusal --doubt [--write-doubt]   # the floor an answer doubts

Reads the questions of each tuning corpus (splits ``tune`` and ``tune2``) and of each written
training code base (issue 44's ``wtrain``, those indexed here; ``--tuning-only`` leaves them
out), and the hits saved for them in ``bench/.cache/answers-hits``, each retrieved with a ranker
that never saw its code base, so that the ranker's confidence is out of sample as on a code base
it never saw (the shipped ranker is trained on every one of them)::

    python -m coderag_training.fit.ranker ROWS.jsonl ... --fold-rankers F
    CODERAG_DATA_DIR=bench/.cache/data python -m coderag_training.refusal_hits F
    python -m coderag_training.fit.refusal

``make models`` runs every step. ``--lexical`` fits the rule for a repository whose vectors are
still being written (``refusal_lexical.json``) on the hits of ``bench/answers.py --lexical``
(vector routes left out), retrieved the same way.

It fits a logistic model of "absent" over ``relevance.FEATURES`` and picks the probability
threshold with the best refusal accuracy minus false refusals whose false refusals stay within
the goal. It reports leave-one-corpus-out figures (fit on the others, the held-out one
scored), then fits on all of them and writes the model and its card. The rule is applied as
``/ask`` applies it: the named-term check first, and never against a question that names an
identifier of the code. Nothing here reads the test split.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from coderag import fitted
from coderag.gate import names_code
from coderag.schemas import Hit
from coderag.settings import Settings
from coderag_generator import refusal
from coderag_retriever import relevance
from coderag_training import cards, pins, refusal_hits
from coderag_training.refusal_hits import question_file

HITS = pins.CACHE / "answers-hits"
"""Where bench/answers.py keeps each corpus's retrieved hits."""

SETTINGS = Settings()
"""The packaged defaults: the encoder the tuning hits' cosines come from, the Chinese words."""

ENCODER = SETTINGS.embed_model_2
"""The encoder whose cosines the tuning hits carry (the packaged default)."""

ITERATIONS = 5000
"""Gradient-descent steps of one fit."""

LOSS_EVERY = 250
"""Steps between two points of the loss curve a card records."""

Cases = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]
"""(features, absent?, refused before the model, model may refuse, corpus) per question."""


def code_bases(hits_dir: Path, tuning_only: bool) -> list[str]:
    """The tuning corpora, then the written training code bases with saved hits."""
    if tuning_only:
        return refusal_hits.tuning()
    saved = [n for n in refusal_hits.written_training() if (hits_dir / f"{n}.json").is_file()]
    return refusal_hits.tuning() + saved


def saved(name: str, hits_dir: Path = HITS) -> list[tuple[dict[str, Any], list[Hit]]]:
    """A corpus's questions, each with the hits ``bench/answers.py`` saved for it."""
    questions = pins.read_jsonl(question_file(name))
    kept = json.loads((hits_dir / f"{name}.json").read_text("utf-8"))
    if len(kept) != len(questions):
        raise SystemExit(f"{name}: saved hits are stale; rerun bench/answers.py for it")
    return [
        (q, [Hit.model_validate(h) for h in hits])
        for q, (hits, _) in zip(questions, kept, strict=True)
    ]


def cases(corpora: list[str], hits_dir: Path = HITS, zh_words: bool = False) -> Cases:
    """(features, absent?, refused before the model, model may refuse, corpus) per question."""
    x, y, pre, open_, names = [], [], [], [], []
    for name in corpora:
        for q, hits in saved(name, hits_dir):
            extra = relevance.english(q["query"], SETTINGS) if zh_words else []
            f = relevance.features(q["query"], hits, extra)
            x.append([f[k] for k in relevance.FEATURES])
            y.append(q["type"] == "absent")
            pre.append(refusal.gate(q["query"], hits, q["lang"], False) is not None)
            open_.append(not names_code(hits))
            names.append(name)
    return np.array(x), np.array(y, bool), np.array(pre), np.array(open_), names


def fit(
    x: np.ndarray, y: np.ndarray, l2: float, curve: list[float] | None = None
) -> dict[str, Any]:
    """Logistic regression by gradient descent on standardised features (L2 on the weights);
    ``curve`` collects the mean log loss every ``LOSS_EVERY`` steps."""
    mean, scale = x.mean(0), x.std(0)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    w, b = np.zeros(z.shape[1]), 0.0
    for step in range(ITERATIONS):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        if curve is not None and step % LOSS_EVERY == 0:
            q = np.clip(p, 1e-12, 1 - 1e-12)
            curve.append(float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q))))
        w -= 0.1 * (z.T @ (p - y) + l2 * w) / len(y)
        b -= 0.1 * float((p - y).mean())
    return {"mean": mean.tolist(), "scale": scale.tolist(), "weights": w.tolist(), "bias": b}


def probabilities(model: dict[str, Any], x: np.ndarray) -> np.ndarray:
    """p(absent) per row."""
    z = (x - np.array(model["mean"])) / np.array(model["scale"])
    return 1 / (1 + np.exp(-(z @ np.array(model["weights"]) + model["bias"])))


def rates(refused: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(refusal accuracy on absent questions, false refusals on answerable ones)."""
    return float(refused[y].mean()), float(refused[~y].mean())


def threshold(
    p: np.ndarray, y: np.ndarray, pre: np.ndarray, open_: np.ndarray, max_fr: float
) -> tuple[float, float, float]:
    """The threshold with the best accuracy minus false refusals within ``max_fr``."""
    best = (1.0, *rates(pre, y))
    for t in np.linspace(0.0, 1.0, 201):
        ra, fr = rates(pre | (open_ & (p >= t)), y)
        if fr <= max_fr and ra - fr > best[1] - best[2] + 1e-9:
            best = (float(t), ra, fr)
    return best


def rule(
    x: np.ndarray,
    y: np.ndarray,
    pre: np.ndarray,
    open_: np.ndarray,
    l2: float,
    max_fr: float,
    curve: list[float] | None = None,
) -> tuple[dict[str, Any], float, float, float]:
    """A rule fitted on these rows: (model, threshold, refusal accuracy, false refusals)."""
    model = fit(x, y, l2, curve)
    return model, *threshold(probabilities(model, x), y, pre, open_, max_fr)


def refuses(
    model: dict[str, Any], t: float, x: np.ndarray, pre: np.ndarray, open_: np.ndarray
) -> np.ndarray:
    """Which rows a rule refuses: the named-term check first, then the model where it may."""
    return pre | (open_ & (probabilities(model, x) >= t))


MAX_DOUBTED = 0.10
"""Most answerable questions an answer may call doubtful (of those answered, held out)."""


def doubt_report(p: np.ndarray, y: np.ndarray, refused: np.ndarray, open_: np.ndarray) -> float:
    """Of the questions answered (not refused) held out, how many an answer would say it doubts
    at each p(absent) floor: the absent ones (caught) against the answerable ones (hedged);
    returns the lowest floor that calls at most ``MAX_DOUBTED`` of the answerable doubtful."""
    answered = ~refused & open_
    print("\n| doubt floor | answered absent said doubtful | answered answerable said doubtful |")
    print("| --- | --- | --- |")
    chosen = 1.0
    for floor in (0.6, 0.55, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2):
        said = answered & (p >= floor)
        a, n = said & y, said & ~y
        print(f"| {floor:.2f} | {int(a.sum())} / {int((answered & y).sum())} | "
              f"{int(n.sum())} / {int((answered & ~y).sum())} |")  # fmt: skip
        if n.sum() <= MAX_DOUBTED * (answered & ~y).sum():
            chosen = floor
    print(f"\nLowest floor calling at most {MAX_DOUBTED:.0%} of answered answerable questions "
          f"doubtful: {chosen:.2f}")  # fmt: skip
    return chosen


def arguments(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--max-false-refusals", type=float, default=0.05)
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--dry-run", action="store_true", help="report only, write nothing")
    ap.add_argument(
        "--lexical",
        action="store_true",
        help="the rule for an index whose vectors are still being written (answers.py --lexical)",
    )
    ap.add_argument(
        "--tuning-only",
        action="store_true",
        help="the tuning corpora alone, without the written training code bases",
    )
    ap.add_argument(
        "--zh-words",
        action="store_true",
        help="support counts a Chinese question's English words (relevance.english) as its own",
    )
    ap.add_argument(
        "--doubt",
        action="store_true",
        help="also: of the answered held-out questions, how many each p(absent) floor calls "
        "doubtful (absent against answerable)",
    )
    ap.add_argument(
        "--write-doubt",
        action="store_true",
        help="with --doubt: write only the chosen floor into the shipped rule, and stop",
    )
    return ap.parse_args(argv)


def main(argv: list[str]) -> int:
    """Report leave-one-corpus-out, fit on all tuning corpora, write the model and its card."""
    args = arguments(argv)
    command = " ".join(["python -m coderag_training.fit.refusal", *argv])
    started = time.monotonic()
    hits_dir = HITS.with_name("answers-hits-lexical") if args.lexical else HITS
    tuning = code_bases(hits_dir, args.tuning_only)
    path = relevance.LEXICAL_MODEL_FILE if args.lexical else relevance.MODEL_FILE
    x, y, pre, open_, names = cases(tuning, hits_dir, args.zh_words)
    corpus = np.array(names)
    print(f"{len(y)} questions, {int(y.sum())} absent, {len(tuning)} code bases\n")
    print("| held-out corpus | absent | threshold | fit: refusal acc / false refusals | "
          "held-out: learned rule | held-out: named-term check only |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    pooled = np.zeros(len(y), bool)  # each question refused or not by the fold that held it out
    held_p = np.zeros(len(y))  # p(absent) under the fold that held the question out
    held_out: dict[str, Any] = {"method": "leave one tuning corpus out: fitted on the others"}
    for held in tuning:
        m = corpus != held
        model, t, ra, fr = rule(x[m], y[m], pre[m], open_[m], args.l2, args.max_false_refusals)
        h = ~m
        held_p[h] = probabilities(model, x[h])
        pooled[h] = refuses(model, t, x[h], pre[h], open_[h])
        got = rates(pooled[h], y[h])
        only = rates(pre[h], y[h])
        held_out[held] = {
            "absent": int(y[h].sum()),
            "threshold": t,
            "absent_refused": got[0],
            "answerable_refused": got[1],
        }
        print(f"| {held} | {int(y[h].sum())} | {t:.3f} | {ra:.2f} / {fr:.2f} | "
              f"{got[0]:.2f} / {got[1]:.2f} | {only[0]:.2f} / {only[1]:.2f} |")  # fmt: skip
    zh = np.array([c == 1.0 for c in x[:, list(relevance.FEATURES).index("chinese")]])
    for label, part in (("all", np.ones(len(y), bool)), ("English", ~zh), ("Chinese", zh)):
        ra, fr = rates(pooled[part], y[part])
        only = rates(pre[part], y[part])
        held_out[f"pooled, {label}"] = {"absent_refused": ra, "answerable_refused": fr}
        print(f"| held out, pooled, {label} | {int(y[part].sum())} | | | {ra:.2f} / {fr:.2f} | "
              f"{only[0]:.2f} / {only[1]:.2f} |")  # fmt: skip
    if args.doubt:
        floor = doubt_report(held_p, y, pooled, open_)
        if args.write_doubt:  # only the floor: the shipped rule's weights stay as they are
            shipped = json.loads(path.read_text("utf-8"))
            shipped["doubt"] = floor
            shipped["doubt_chosen_by"] = (
                f"lowest p(absent) floor calling at most {MAX_DOUBTED:.0%} of the answered "
                f"answerable tuning questions doubtful, each held out of its rule's fit"
            )
            fitted.dump(path, shipped)
            cards.amend(path, command, {"doubt": floor, "max_doubted": MAX_DOUBTED})
            print(f"wrote the doubt floor into {path} and its card")
            return 0
    curve: list[float] = []
    model, t, ra, fr = rule(x, y, pre, open_, args.l2, args.max_false_refusals, curve)
    print(f"\nAll tuning corpora: threshold {t:.3f}, refusal accuracy {ra:.2f}, false refusals "
          f"{fr:.2f} (in sample).")  # fmt: skip
    if args.dry_run:
        return 0
    out = {
        "encoder": ENCODER,
        "features": list(relevance.FEATURES),
        **model,
        "threshold": t,
        "zh_words": args.zh_words,
        "fitted_on": {
            "corpora": tuning,
            "questions": len(y),
            "absent": int(y.sum()),
            "l2": args.l2,
            "max_false_refusals": args.max_false_refusals,
        },
    }
    if args.lexical:
        out["state"] = "vectors missing: keyword, symbol, exact, feedback and history routes"
    fitted.dump(path, out)
    cards.write_card(
        path,
        command=command,
        inputs=[
            pins.CORPORA_FILE,
            *(question_file(c) for c in tuning),
            *(hits_dir / f"{c}.json" for c in tuning),
        ],
        code_bases=tuning,
        questions={"answerable": int((~y).sum()), "absent": int(y.sum())},
        steps=ITERATIONS,
        seconds=time.monotonic() - started,
        loss=curve,
        held_out=held_out,
        extra={
            "l2": args.l2,
            "max_false_refusals": args.max_false_refusals,
            "threshold": t,
            "in_sample": {"absent_refused": ra, "answerable_refused": fr},
        },
        notes=f"the loss is the mean log loss every {LOSS_EVERY} steps of the fit on all corpora",
    )
    print(f"wrote {path} and its card")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
