"""Confidence: whether the retrieved code supports any answer. Beside the score gate (the best
cosine similarity), a question whose content words the best hits barely mention is refused
unless its similarity clears the gate by a margin: the absent questions that pass the gate are
the ones whose words the code does not use. Both numbers are calibrated leave-one-corpus-out by
``bench/answers.py`` (docs/BENCHMARKS.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coderag.gate import best_similarity, under
from coderag.schemas import Hit
from coderag_generator.evidence import support, terms

TOP = 3
"""Hits whose support counts."""


@dataclass(frozen=True)
class Thresholds:
    """Refuse when support is under ``floor`` and similarity under the gate plus ``margin``."""

    margin: float
    floor: float


DEFAULT = Thresholds(margin=0.0, floor=0.0)
"""The calibrated thresholds: the medians of the leave-one-corpus-out fits over the tuning
corpora (bench/answers.py) are 0 and 0, i.e. the support check did not beat the score gate on a
held-out code base, so it is off until a calibration says otherwise."""


@dataclass(frozen=True)
class Signals:
    """What the decision reads of one question's hits."""

    similarity: float
    support: float
    has_terms: bool


def signals(query: str, hits: Sequence[Hit]) -> Signals:
    """Best vector similarity, best share of the question's terms a top hit mentions."""
    sim = best_similarity(hits)
    best = max((support(query, h) for h in hits[:TOP]), default=0.0)
    return Signals(sim, best, bool(terms(query)))


def weak(s: Signals, score_gate: float, th: Thresholds = DEFAULT) -> bool:
    """Whether the hits are too weak to answer from (``score_gate`` 0 turns this off too)."""
    if score_gate <= 0:
        return False
    if under(s.similarity, score_gate):
        return True
    return s.has_terms and s.support < th.floor and s.similarity < score_gate + th.margin
