"""The answer benchmark's refusal calibration: the score gate and support thresholds fitted
leave-one-corpus-out over questions with their retrieval (``bench/answers.py`` runs it)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from coderag.gate import names_code
from coderag_generator import refusal
from coderag_generator.confidence import Thresholds, signals, weak

GATE_GRID = [i / 1000 for i in range(1001)]
"""Score-gate thresholds tried in calibration."""

MAX_FALSE_REFUSALS = 0.10
"""Calibration keeps the false-refusal rate on the fitting corpora at or under this goal."""


@dataclass
class Case:
    """One question with its retrieval."""

    corpus: str
    line: int
    q: dict[str, Any]
    hits: list[dict[str, Any]]
    retrieve_ms: float

    @property
    def absent(self) -> bool:
        """Whether the corpus does not hold the answer."""
        return self.q["type"] == "absent"


MARGINS = [0.0, 0.01, 0.02, 0.03, 0.05, 0.08]
"""Support margins above the gate tried in calibration."""

FLOORS = [0.0, 0.2, 0.25, 0.34, 0.5]
"""Support floors tried in calibration."""


@dataclass(frozen=True)
class Decision:
    """A refusal rule: the score gate and the support thresholds."""

    gate: float
    margin: float
    floor: float

    @property
    def thresholds(self) -> Thresholds:
        """The support thresholds of ``confidence``."""
        return Thresholds(self.margin, self.floor)


def gate_refuses(case: Case, d: Decision) -> bool:
    """Whether the pre-model rules refuse this question under the decision ``d``."""
    q = case.q
    return refusal.gate(q["query"], case.hits, q["lang"], d.gate, d.thresholds) is not None


def rates(cases: list[Case], d: Decision) -> tuple[float, float]:
    """(refusal accuracy on absent, false-refusal rate on answerable) of the rules alone."""
    absent = [c for c in cases if c.absent]
    answerable = [c for c in cases if not c.absent]
    ra = sum(gate_refuses(c, d) for c in absent) / max(len(absent), 1)
    fr = sum(gate_refuses(c, d) for c in answerable) / max(len(answerable), 1)
    return ra, fr


def _sweep(cases: list[Case]) -> dict[Decision, tuple[float, float]]:
    """Rates of every decision of the grid, from signals read once per case (the same rule as
    ``refusal.gate``: the named-term check first, then ``confidence.weak`` unless the question
    names a symbol of the code)."""
    pre = {id(c): refusal.gate(c.q["query"], c.hits, c.q["lang"], 0.0) is not None for c in cases}
    named = {id(c): names_code(c.hits) for c in cases}
    sig = {id(c): signals(c.q["query"], c.hits) for c in cases}
    absent = [c for c in cases if c.absent]
    answerable = [c for c in cases if not c.absent]
    out = {}
    for t in GATE_GRID[800:950:5]:
        for m in MARGINS:
            for f in FLOORS:
                d = Decision(t, m, f)

                def refused(c: Case, d: Decision = d) -> bool:
                    i = id(c)
                    return pre[i] or (not named[i] and weak(sig[i], d.gate, d.thresholds))

                ra = sum(map(refused, absent)) / max(len(absent), 1)
                fr = sum(map(refused, answerable)) / max(len(answerable), 1)
                out[d] = (ra, fr)
    return out


def calibrate(cases: list[Case]) -> tuple[Decision, float, float]:
    """The decision with the best refusal accuracy minus false refusals whose false refusals
    stay within the goal (the simplest such decision on ties); with its two rates."""
    best: tuple[Decision, float, float] | None = None
    for d, (ra, fr) in _sweep(cases).items():
        if fr > MAX_FALSE_REFUSALS:
            continue
        if best is None or ra - fr > best[1] - best[2] + 1e-9:
            best = (d, ra, fr)
    return best or (Decision(0.0, 0.0, 0.0), *rates(cases, Decision(0.0, 0.0, 0.0)))


def calibration(cases: list[Case], names: list[str]) -> tuple[dict[str, Decision], list[str]]:
    """Per held-out corpus, the decision fitted on the others; and the report table."""
    fold: dict[str, Decision] = {}
    rows = [
        "| held-out corpus | fitted on the others: gate, margin, support floor | "
        "fit: refusal acc / false refusals | held-out, named-term check only | "
        "held-out, gate alone | held-out, gate and support |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for held in names:
        fit = [c for c in cases if c.corpus != held]
        test = [c for c in cases if c.corpus == held]
        if not fit or not test:
            continue
        d, ra, fr = calibrate(fit)
        fold[held] = d
        off = rates(test, Decision(0.0, 0.0, 0.0))
        alone = rates(test, Decision(d.gate, 0.0, 0.0))
        on = rates(test, d)
        rows.append(
            f"| {held} | {d.gate:.3f}, {d.margin:.2f}, {d.floor:.2f} | {ra:.2f} / {fr:.2f} | "
            f"{off[0]:.2f} / {off[1]:.2f} | {alone[0]:.2f} / {alone[1]:.2f} | "
            f"{on[0]:.2f} / {on[1]:.2f} |"
        )
    if fold:
        med = Decision(
            statistics.median(d.gate for d in fold.values()),
            statistics.median(d.margin for d in fold.values()),
            statistics.median(d.floor for d in fold.values()),
        )
        whole = rates(cases, med)
        rows += [
            "",
            f"Medians of the held-out fits: gate {med.gate:.3f}, support margin {med.margin:.2f}, "
            f"support floor {med.floor:.2f}; on all these corpora they give refusal accuracy "
            f"{whole[0]:.2f} and false refusals {whole[1]:.2f} (rules only, before any answer).",
        ]
    return fold, rows
