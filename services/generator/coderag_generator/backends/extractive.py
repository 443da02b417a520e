"""Extractive backend: no language model. It quotes the best retrieved unit and the retrieved units
linked to it by a call, with their anchors, so every sentence it writes is checkable; useful on
machines without a model and as a baseline.

Unrelated runners-up are left out: on the answer benchmark, quoting the top three cut citation
precision from 0.42 to 0.31 for a recall gain of 0.08 (docs/BENCHMARKS.md)."""

from __future__ import annotations

from collections.abc import Iterator

from coderag_generator.backends.base import Prompt

QUOTED_UNITS = 3
"""Best units the answer considers quoting."""


def quoted(units: list[dict]) -> list[dict]:
    """The best unit, then those of the next best that call it or that it calls.

    Looking further down the ranking, or at links of links, cut citation precision from 0.42 to
    0.38 on the answer benchmark."""
    return units[:1] + [u for u in units[1:QUOTED_UNITS] if _linked(u, units[0])]


def _linked(a: dict, b: dict) -> bool:
    return a["symbol"] in (b.get("calls") or ()) or b["symbol"] in (a.get("calls") or ())


class ExtractiveBackend:
    """Answers by describing and citing the best units; reads them from the prompt's context."""

    name = "extractive"
    window = 8192

    def count_tokens(self, text: str) -> int:
        """Whitespace tokens: there is no model tokenizer."""
        return len(text.split())

    def render(self, messages: list[dict[str, str]]) -> Prompt:
        """Join the messages; the answer is built from ``Prompt.context`` alone."""
        text = "\n\n".join(m["content"] for m in messages)
        return Prompt(messages=messages, text=text, tokens=self.count_tokens(text))

    def stream(
        self, prompt: Prompt, *, temperature: float, top_p: float, max_tokens: int
    ) -> Iterator[str]:
        """Write one line per quoted unit: what it is, its first doc line, and its anchor."""
        units = prompt.context
        zh = prompt.lang == "zh"
        if not units:
            return
        yield ("最相关的代码：\n" if zh else "The most relevant code:\n")
        for u in quoted(units):
            doc = (u.get("doc") or "").strip().splitlines()
            what = f"`{u['symbol']}` ({u['kind']})"
            sig = f" — `{u['signature']}`" if u.get("signature") else ""
            summary = f": {doc[0]}" if doc else ""
            anchor = f"FILE: {u['file']}:{u['start_line']}-{u['end_line']}"
            yield f"- {what}{sig}{summary} ({'参见' if zh else 'see'} {anchor})\n"
