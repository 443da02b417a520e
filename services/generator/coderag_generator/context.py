"""Context assembly (R10, seed 002 §3.4): the retrieved units as ``FILE: path:start-end`` snippets
with their signatures, in reading order (a caller before the functions it calls), with "A calls B"
relation notes, within a token budget of the model's window measured by its own tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from coderag.schemas import Hit

BUDGET_SHARE = 0.6
"""Share of the model window the snippets may fill (the rest is instructions and answer)."""

OPEN, CLOSE = "<snippet>", "</snippet>"
"""Markers around each snippet's code: what is between them is data, never instructions."""


@dataclass
class Snippet:
    """One unit as it appears in the prompt."""

    file: str
    start_line: int
    end_line: int
    symbol: str
    kind: str
    signature: str
    text: str
    calls: list[str] = field(default_factory=list)

    @classmethod
    def from_hit(cls, h: Hit) -> Snippet:
        """The snippet of a retrieved hit."""
        return cls(
            h.file,
            h.start_line,
            h.end_line,
            h.symbol,
            h.kind,
            h.signature,
            h.text or "",
            list(h.calls),
        )

    @property
    def anchor(self) -> str:
        """The anchor the model must cite."""
        return f"FILE: {self.file}:{self.start_line}-{self.end_line}"

    def render(self) -> str:
        """The snippet as the prompt shows it: anchor, signature line, then the code between
        data markers, with anchors inside it defused (it is untrusted repository text)."""
        head = self.anchor
        if self.signature and self.kind in ("function", "method"):
            head += f"  ({self.kind} {self.symbol}: {defuse(self.signature)})"
        return f"{head}\n{OPEN}\n{defuse(self.text)}\n{CLOSE}"


def defuse(text: str) -> str:
    """Repository text made unable to pass for prompt structure: a ``FILE:`` anchor written
    inside it no longer reads as one (so copying it cannot forge a citation) and it cannot close
    its data markers."""
    return text.replace("FILE:", "[FILE]:").replace(CLOSE, CLOSE.replace("<", "<\\"))


def reading_order(snippets: list[Snippet]) -> list[Snippet]:
    """Callers before callees (depth first from the best-ranked root), otherwise rank order."""
    by_symbol = {s.symbol: s for s in snippets}
    called = {c for s in snippets for c in s.calls if c in by_symbol}
    out: list[Snippet] = []
    seen: set[int] = set()

    def visit(s: Snippet) -> None:
        if id(s) in seen:
            return
        seen.add(id(s))
        out.append(s)
        for c in s.calls:
            if c in by_symbol:
                visit(by_symbol[c])

    for s in snippets:
        if s.symbol not in called:
            visit(s)
    for s in snippets:
        visit(s)  # members of a call cycle
    return out


def relation_notes(snippets: list[Snippet]) -> list[str]:
    """One "A calls B" line per call between two snippets."""
    present = {s.symbol for s in snippets}
    return [f"[relation] {s.symbol} calls {c}" for s in snippets for c in s.calls if c in present]


def assemble(
    snippets: list[Snippet], count_tokens: Callable[[str], int], budget: int
) -> tuple[str, list[Snippet]]:
    """The best-ranked snippets that fit ``budget`` tokens (a too-long first one is cut to fit),
    rendered in reading order with relation notes; returns the text and the snippets shown."""
    kept: list[Snippet] = []
    used = 0
    for snip in snippets:
        cost = count_tokens(snip.render()) + 12  # + its share of relation notes and separators
        if used + cost > budget:
            if kept:
                break
            cut = _cut(snip, count_tokens, budget)
            if cut is None:
                break
            snip = cut
            cost = count_tokens(snip.render()) + 12
        kept.append(snip)
        used += cost
    ordered = reading_order(kept)
    parts = [s.render() for s in ordered]
    notes = relation_notes(ordered)
    text = "\n\n".join(parts)
    if notes and count_tokens(text + "\n\n" + "\n".join(notes)) <= budget:
        text += "\n\n" + "\n".join(notes)
    return text, ordered


def _cut(snip: Snippet, count_tokens: Callable[[str], int], budget: int) -> Snippet | None:
    """The snippet's first lines that fit the budget, its range shortened to match."""
    lines = snip.text.splitlines()
    while lines:
        cut = Snippet(
            snip.file,
            snip.start_line,
            snip.start_line + len(lines) - 1,
            snip.symbol,
            snip.kind,
            snip.signature,
            "\n".join(lines),
            snip.calls,
        )
        if count_tokens(cut.render()) + 12 <= budget:
            return cut
        lines = lines[: len(lines) * 3 // 4] if len(lines) > 1 else []
    return None
