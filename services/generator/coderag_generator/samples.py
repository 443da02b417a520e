"""Chat samples for the generator's fine-tuning and their split into training and held-out sets."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Sample:
    """One chat to train on or to evaluate: prompt messages, target answer, what it must cite."""

    kind: str
    lang: str
    symbol: str
    question: str
    system: str
    user: str
    target: str
    cite: tuple[str, int, int] | None
    context: tuple[tuple[str, int, int], ...]

    def messages(self) -> list[dict[str, str]]:
        """The prompt: system and user messages."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]

    def chat(self) -> list[dict[str, str]]:
        """The prompt followed by the target answer."""
        return [*self.messages(), {"role": "assistant", "content": self.target}]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass
class TrapSet:
    """Samples split by symbol, and the line counts of the files they cite."""

    train: list[Sample]
    held_out: list[Sample]
    file_lines: dict[str, int]

    def lines_of(self, path: str) -> int | None:
        """Line count of an indexed file (the citation check's lookup)."""
        return self.file_lines.get(path)
