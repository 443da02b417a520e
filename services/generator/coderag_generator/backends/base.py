"""The interface every answer backend implements."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from coderag.schemas import Hit


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: the messages and their exact token count under the backend's tokenizer."""

    messages: list[dict[str, str]]
    text: str
    tokens: int
    stop: list[str] | None = None


@dataclass(frozen=True)
class Grounding:
    """What the answer must rest on: the question, its language, and the hits the prompt shows
    (cut to the lines shown, best first). The extractive backend answers from them alone; the
    llama.cpp backend constrains its citations to them; the others read only the prompt."""

    query: str = ""
    lang: str = "en"
    hits: tuple[Hit, ...] = ()


UNGROUNDED = Grounding()
"""No hits: a bare prompt (a warm-up, a speed benchmark), answered from its text alone."""


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
        self,
        prompt: Prompt,
        *,
        temperature: float,
        top_p: float,
        max_tokens: int,
        grounding: Grounding = UNGROUNDED,
    ) -> Iterator[str]:
        """Generate the answer to ``prompt``, grounded in ``grounding``'s hits."""
        ...
