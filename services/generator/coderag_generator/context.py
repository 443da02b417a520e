"""Context assembly: the retrieved units as ``FILE: path:start-end`` snippets, within a token
budget of the model's window."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

BUDGET_SHARE = 0.6
"""Share of the model window the snippets may fill (the rest is instructions and answer)."""


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

    @property
    def anchor(self) -> str:
        """The anchor the model must cite."""
        return f"FILE: {self.file}:{self.start_line}-{self.end_line}"

    def render(self) -> str:
        """The snippet as the prompt shows it."""
        return f"{self.anchor}\n{self.text}"


def assemble(
    snippets: list[Snippet], count_tokens: Callable[[str], int], budget: int
) -> tuple[str, list[Snippet]]:
    """Snippets in rank order that fit ``budget`` tokens; a too-long first one is cut to fit."""
    kept: list[Snippet] = []
    parts: list[str] = []
    used = 0
    for snip in snippets:
        block = snip.render()
        cost = count_tokens(block) + 2
        if used + cost > budget:
            if kept:
                break
            lines = snip.text.splitlines()
            while lines and count_tokens("\n".join(lines)) + 40 > budget:
                lines = lines[: max(1, len(lines) * 3 // 4)] if len(lines) > 1 else []
            if not lines:
                break
            snip = Snippet(
                snip.file,
                snip.start_line,
                snip.start_line + len(lines) - 1,
                snip.symbol,
                snip.kind,
                snip.signature,
                "\n".join(lines),
            )
            block, cost = snip.render(), count_tokens(snip.render()) + 2
        kept.append(snip)
        parts.append(block)
        used += cost
    return "\n\n".join(parts), kept
