"""Extractive backend: no language model. It explains the cited units from what the index knows
and quotes the lines that carry the evidence under their own anchors (``explain.py``), so every
sentence it writes is checkable; useful on machines without a model and as a baseline."""

from __future__ import annotations

from collections.abc import Iterator

from coderag_generator.backends.base import Prompt
from coderag_generator.explain import compose


class ExtractiveBackend:
    """Answers by describing and citing the units that bear on the question; reads them from the
    prompt's context."""

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
        """The explanation, one paragraph at a time."""
        text = compose(prompt.context, prompt.query, prompt.lang)
        for para in text.split("\n\n"):
            if para:
                yield para + "\n\n"
