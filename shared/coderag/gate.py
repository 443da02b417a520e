"""The score gate, decided once for /search's ``below_gate`` (and /ask's refusal when the gate is
set by hand or the learned refusal rule does not apply): nothing relevant was found when the best
vector similarity is under the gate and no hit came from the exact-identifier route (a named
identifier is relevant however it is worded)."""

from __future__ import annotations

from collections.abc import Sequence

from coderag.schemas import Hit


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
