"""Call-graph expansion (R8): for questions about a flow, the callers and callees (depth 2) of the
best hits join the ranking, so every link of a chain can reach the context."""

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


def is_flow_question(text: str) -> bool:
    """Whether a question asks how something flows through the code."""
    return FLOW.search(text) is not None


def expand(graph: Graph, repo: str, scored: dict[str, float], depth: int = 2) -> dict[str, float]:
    """Scores with the seeds' call-graph neighbours added at ``seed score × DECAY^hops``."""
    seeds = sorted(scored, key=lambda u: -scored[u])[:SEEDS]
    out = dict(scored)
    for seed in seeds:
        for unit, hops in graph.neighbourhood(repo, [seed], depth).items():
            if hops:
                out[unit] = max(out.get(unit, 0.0), scored[seed] * DECAY**hops)
    return out
