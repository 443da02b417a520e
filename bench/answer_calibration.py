"""The answer benchmark's refusal calibration: the cosine score gate fitted leave-one-corpus-out
over questions with their retrieval (``bench/answers.py`` runs it)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from coderag.gate import below_gate, best_similarity, names_code, under
from coderag_generator import refusal
from coderag_retriever.relevance import JUDGED

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


@dataclass(frozen=True)
class Decision:
    """A refusal rule: the cosine score gate."""

    gate: float


def gate_refuses(case: Case, d: Decision) -> bool:
    """Whether the pre-model rules refuse this question under the decision ``d``."""
    q = case.q
    hits = case.hits[:JUDGED]  # what the retriever's verdict reads
    return refusal.gate(q["query"], case.hits, q["lang"], below_gate(hits, d.gate)) is not None


def rates(cases: list[Case], d: Decision) -> tuple[float, float]:
    """(refusal accuracy on absent, false-refusal rate on answerable) of the rules alone."""
    absent = [c for c in cases if c.absent]
    answerable = [c for c in cases if not c.absent]
    ra = sum(gate_refuses(c, d) for c in absent) / max(len(absent), 1)
    fr = sum(gate_refuses(c, d) for c in answerable) / max(len(answerable), 1)
    return ra, fr


def _sweep(cases: list[Case]) -> dict[Decision, tuple[float, float]]:
    """Rates of every gate of the grid, from what is read once per case (the same rule as
    ``refusal.gate`` on the retriever's verdict: the named-term check first, then the gate unless
    the question names a symbol of the code)."""
    pre = {id(c): refusal.gate(c.q["query"], c.hits, c.q["lang"], False) is not None for c in cases}
    named = {id(c): names_code(c.hits[:JUDGED]) for c in cases}
    sim = {id(c): best_similarity(c.hits[:JUDGED]) for c in cases}
    absent = [c for c in cases if c.absent]
    answerable = [c for c in cases if not c.absent]
    out = {}
    for t in GATE_GRID[800:950:5]:
        d = Decision(t)

        def refused(c: Case, d: Decision = d) -> bool:
            i = id(c)
            return pre[i] or (not named[i] and under(sim[i], d.gate))

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
    return best or (Decision(0.0), *rates(cases, Decision(0.0)))


def calibration(cases: list[Case], names: list[str]) -> tuple[dict[str, Decision], list[str]]:
    """Per held-out corpus, the decision fitted on the others; and the report table."""
    fold: dict[str, Decision] = {}
    rows = [
        "| held-out corpus | gate fitted on the others | fit: refusal acc / false refusals | "
        "held-out, named-term check only | held-out, with the gate |",
        "| --- | --- | --- | --- | --- |",
    ]
    for held in names:
        fit = [c for c in cases if c.corpus != held]
        test = [c for c in cases if c.corpus == held]
        if not fit or not test:
            continue
        d, ra, fr = calibrate(fit)
        fold[held] = d
        off = rates(test, Decision(0.0))
        on = rates(test, d)
        rows.append(
            f"| {held} | {d.gate:.3f} | {ra:.2f} / {fr:.2f} | "
            f"{off[0]:.2f} / {off[1]:.2f} | {on[0]:.2f} / {on[1]:.2f} |"
        )
    if fold:
        med = Decision(statistics.median(d.gate for d in fold.values()))
        whole = rates(cases, med)
        rows += [
            "",
            f"Median of the held-out fits: gate {med.gate:.3f}; on all these corpora it gives "
            f"refusal accuracy {whole[0]:.2f} and false refusals {whole[1]:.2f} (rules only, "
            "before any answer).",
        ]
    return fold, rows
