"""The interface every answer backend implements."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from coderag.schemas import Hit


@dataclass
class Prompt:
    """A rendered prompt: the messages and their exact token count under the backend's tokenizer."""

    messages: list[dict[str, str]]
    text: str
    tokens: int
    stop: list[str] | None = None
    context: list[Hit] = field(default_factory=list)
    lang: str = "en"
    query: str = ""


class Backend(Protocol):
    """Turns a prompt into answer text, streamed piece by piece."""

    name: str
    window: int

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under this backend's tokenizer."""
        ...

    def render(self, messages: list[dict[str, str]]) -> Prompt:
        """Apply the chat template and count the prompt's tokens."""
        ...

    def stream(
        self, prompt: Prompt, *, temperature: float, top_p: float, max_tokens: int
    ) -> Iterator[str]:
        """Generate the answer."""
        ...
