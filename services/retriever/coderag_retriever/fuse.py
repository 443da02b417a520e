"""Fusion of route rankings: weighted reciprocal-rank fusion (k=60, seed 002)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def rrf(
    rankings: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float],
    k: int = 60,
) -> list[tuple[int, float, dict[str, int]]]:
    """Fuse rankings into (position, score, {route: 1-based rank}), best first.

    The score is normalised so that a unit ranked first by every weighted route scores 1.0.
    """
    total = sum(weights.get(r, 1.0) for r in rankings) or 1.0
    best = total / (k + 1)
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for route, ranked in rankings.items():
        w = weights.get(route, 1.0)
        for rank, (pos, _) in enumerate(ranked, start=1):
            scores[pos] = scores.get(pos, 0.0) + w / (k + rank)
            ranks.setdefault(pos, {})[route] = rank
    fused = [(pos, s / best, ranks[pos]) for pos, s in scores.items()]
    fused.sort(key=lambda t: -t[1])
    return fused
