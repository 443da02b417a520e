"""Call-graph expansion (R8): the callers and callees of the best hits join the ranking.

Every question gets the one-hop neighbours of its five best hits: a function that the top hits
call, or that calls them, is more likely part of the answer than an equally scored stranger.
Questions about a flow go ``expand_depth`` hops, so every link of a chain can reach the context.
The first hit is never displaced, so a lookup question keeps the unit it named.
"""

from __future__ import annotations

import re

from coderag.store.graph import Graph

FLOW = re.compile(
    r"\b(flow|flows|chain|path|end(s)? up|lead(s)? to|reach(es)?|trace|pipeline|"
    r"what happens|step(s)? (through|does)|from .+ to |call(s|ed)? .*(into|through)|"
    r"goes through)\b|调用链|流程|链路|经过|最终|一路|过程|从.+到",
    re.IGNORECASE,
)
"""Questions whose answer is a chain of functions."""

SEEDS = 5
"""Best hits whose neighbourhoods are added."""

DECAY = 0.7
"""Score factor per call-graph hop."""

CANDIDATE_SHARE = 0.5
"""A neighbour the routes already found gains this share of its decayed seed score."""

NEW_SHARE = 0.7
"""A neighbour no route found enters at this share of its decayed seed score."""


def is_flow_question(text: str) -> bool:
    """Whether a question asks how something flows through the code."""
    return FLOW.search(text) is not None


def expand(graph: Graph, repo: str, scored: dict[str, float], depth: int = 1) -> dict[str, float]:
    """Scores raised for the call-graph neighbours (within ``depth`` hops, beyond the first only
    through candidates) of the best seeds.

    Neighbours found by the routes add to their own score (two weak signals that agree beat one);
    new ones enter below their seed. Nothing rises above the first hit.
    """
    if not scored or depth < 1:
        return dict(scored)
    order = sorted(scored, key=lambda u: -scored[u])
    first = order[0]
    ceiling = scored[first] * 0.999
    out = dict(scored)
    for seed in order[:SEEDS]:
        frontier = [seed]
        seen = {seed}
        for hops in range(1, depth + 1):
            reached = [u for u in graph.neighbourhood(repo, frontier, 1) if u not in seen]
            seen.update(reached)
            gain = scored[seed] * DECAY**hops
            for unit in reached:
                if unit == first:
                    continue
                if unit in scored:
                    out[unit] = min(out[unit] + CANDIDATE_SHARE * gain, ceiling)
                else:
                    out[unit] = min(max(out.get(unit, 0.0), NEW_SHARE * gain), ceiling)
            # Walk on only through units the routes found too: a chain's links are relevant on
            # their own, and the whole two-hop neighbourhood of a popular function is thousands.
            frontier = [u for u in reached if u in scored]
    return out
