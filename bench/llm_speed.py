"""The llama.cpp speed test of the answer benchmark: time to first token and tokens/s on
~2k-token prompts built from real retrieved snippets, cold (no prompt prefix reused)."""

from __future__ import annotations

import statistics
import time
from typing import Any

from coderag.settings import Settings
from coderag_generator import prompts
from coderag_generator.backends import Backend
from coderag_generator.context import BUDGET_SHARE, Snippet, assemble

SPEED_PROMPT_TOKENS = 2000
"""Size of the prompts the llama.cpp speed test renders."""

SPEED_RUNS = 3
"""Prompts (different questions) timed in the speed test; the median is reported."""

SPEED_MAX_TOKENS = 128
"""Tokens generated per speed run."""


def speed(backend: Backend, cases: list[Any], settings: Settings) -> list[str]:
    """Time to first non-empty piece and tokens/s on ~2k-token prompts of real snippets; ``cases``
    are the answer benchmark's (``q``, ``hits``, ``absent``)."""
    rows = [
        "| question | prompt tokens | first token s | tokens/s | generated tokens |",
        "| --- | --- | --- | --- | --- |",
    ]
    firsts, rates_ = [], []
    answerable = [c for c in cases if not c.absent and c.hits]
    for case in answerable[:: max(1, len(answerable) // SPEED_RUNS)][:SPEED_RUNS]:
        lang = case.q["lang"]
        snippets = [Snippet.from_hit(h) for h in case.hits]
        system = prompts.load("system", lang)
        frame = prompts.load("user", lang)
        fixed = backend.count_tokens(system + frame.format(query=case.q["query"], context=""))
        budget = min(SPEED_PROMPT_TOKENS - fixed - 20, int(backend.window * BUDGET_SHARE))
        context, _ = assemble(snippets, backend.count_tokens, budget)
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": frame.format(query=case.q["query"], context=context)},
        ]
        prompt = backend.render(messages)
        llm = getattr(backend, "llm", None)
        if llm is not None:
            llm.reset()  # no prompt prefix reused from an earlier run: a cold first token
        start = time.perf_counter()
        first_at: float | None = None
        text = ""
        for piece in backend.stream(
            prompt,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=SPEED_MAX_TOKENS,
        ):
            if piece and first_at is None:
                first_at = time.perf_counter()
            text += piece
        end = time.perf_counter()
        first = (first_at or end) - start
        tokens = backend.count_tokens(text)
        rate = (
            (tokens - 1) / (end - first_at) if first_at and end > first_at and tokens > 1 else 0.0
        )
        firsts.append(first)
        rates_.append(rate)
        rows.append(f"| {case.q['id']} | {prompt.tokens} | {first:.2f} | {rate:.1f} | {tokens} |")
    if firsts:
        rows.append(
            f"| median | | {statistics.median(firsts):.2f} | {statistics.median(rates_):.1f} | |"
        )
    return rows
