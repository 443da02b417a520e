"""Extractive backend: no language model. It explains the cited units from what the index knows
and quotes the lines that carry the evidence under their own anchors (``explain.py``), so every
sentence it writes is checkable; useful on machines without a model and as a baseline."""

from __future__ import annotations

from collections.abc import Iterator

from coderag_generator.backends.base import UNGROUNDED, Grounding, Prompt
from coderag_generator.explain import compose


class ExtractiveBackend:
    """Answers by describing and citing the units that bear on the question; reads them from the
    grounding ``stream`` is given, not from the prompt."""

    name = "extractive"
    window = 8192

    def count_tokens(self, text: str) -> int:
        """Whitespace tokens: there is no model tokenizer."""
        return len(text.split())

    def render(self, messages: list[dict[str, str]]) -> Prompt:
        """Join the messages (for their token count): the answer is built from the grounding."""
        text = "\n\n".join(m["content"] for m in messages)
        return Prompt(messages=messages, text=text, tokens=self.count_tokens(text))

    def stream(
        self,
        prompt: Prompt,
        *,
        temperature: float,
        top_p: float,
        max_tokens: int,
        grounding: Grounding = UNGROUNDED,
    ) -> Iterator[str]:
        """The explanation of ``grounding``'s hits, one paragraph at a time."""
        text = compose(list(grounding.hits), grounding.query, grounding.lang)
        for para in text.split("\n\n"):
            if para:
                yield para + "\n\n"
