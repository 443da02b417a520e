"""Fusion of route rankings: weighted reciprocal-rank fusion (k=60, seed 002) or seed 004's
weighted vote; and MMR diversity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


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


def vote(
    rankings: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float],
) -> list[tuple[int, float, dict[str, int]]]:
    """Seed 004's weighted vote: each route's scores divided by its best, weighted and summed.

    A unit every weighted route ranks first scores 1.0."""
    total = sum(weights.get(r, 1.0) for r in rankings) or 1.0
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for route, ranked in rankings.items():
        if not ranked:
            continue
        top = max(s for _, s in ranked) or 1.0
        w = weights.get(route, 1.0) / total
        for rank, (pos, s) in enumerate(ranked, start=1):
            scores[pos] = scores.get(pos, 0.0) + w * max(s, 0.0) / top
            ranks.setdefault(pos, {})[route] = rank
    fused = [(pos, s, ranks[pos]) for pos, s in scores.items()]
    fused.sort(key=lambda t: -t[1])
    return fused


def mmr(
    order: Sequence[int], scores: Mapping[int, float], vectors: np.ndarray, lam: float, k: int
) -> list[int]:
    """Maximal marginal relevance: pick ``k`` of ``order`` trading score against similarity to
    what is already picked (``lam`` = 1 keeps the order)."""
    if lam >= 1.0 or len(order) <= 1:
        return list(order[:k])
    top = max(scores[p] for p in order) or 1.0
    picked: list[int] = []
    left = list(order)
    while left and len(picked) < k:

        def gain(p: int) -> float:
            redundancy = max((float(vectors[p] @ vectors[q]) for q in picked), default=0.0)
            return lam * scores[p] / top - (1 - lam) * redundancy

        best = max(left, key=gain)
        picked.append(best)
        left.remove(best)
    return picked
