"""Whether generated answers do what a trap sample's type asks, and the compliant share per type."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from coderag_generator import prompts
from coderag_generator.citations import check
from coderag_generator.samples import Sample

CLARIFY_MARKERS = {"en": "is not well defined", "zh": "定义不明确"}
"""Text every clarifying (type B) answer contains, per language."""

NEGATIONS = {"en": "No.", "zh": "不对。"}
"""How every correction (type C) answer opens, per language."""


def is_clarifying(answer: str, lang: str) -> bool:
    """Whether an answer asks what a vague question means (in the question's language)."""
    return CLARIFY_MARKERS[lang] in answer


def cites_target(sample: Sample, answer: str, file_lines: Callable[[str], int | None]) -> bool:
    """Whether the answer has a citation that passes the check and lies in the sample's unit."""
    if sample.cite is None:
        return False
    path, start, end = sample.cite
    checked = check(answer, list(sample.context), file_lines)
    return any(c.file == path and start <= c.start_line <= c.end_line <= end for c in checked.valid)


def comply(sample: Sample, answer: str, file_lines: Callable[[str], int | None]) -> bool:
    """Whether a generated answer does what the sample's type asks: the refusal sentence (A),
    a clarifying question (B), a correction citing the unit (C), a citation of the unit."""
    text = answer.strip()
    if sample.kind == "A":
        return prompts.is_refusal(text)
    if sample.kind == "B":
        return is_clarifying(text, sample.lang)
    if prompts.is_refusal(text):
        return False
    if sample.kind == "C" and not text.startswith(NEGATIONS[sample.lang]):
        return False
    return cites_target(sample, text, file_lines)


def compliance(
    samples: Sequence[Sample], answers: Sequence[str], file_lines: Callable[[str], int | None]
) -> dict[str, dict[str, float]]:
    """Compliant share and count per type and overall (key ``all``)."""
    out: dict[str, dict[str, float]] = {}
    groups: dict[str, list[bool]] = {}
    for s, a in zip(samples, answers, strict=True):
        ok = comply(s, a, file_lines)
        groups.setdefault(s.kind, []).append(ok)
        groups.setdefault("all", []).append(ok)
    for kind, oks in groups.items():
        out[kind] = {"n": len(oks), "compliant": sum(oks), "share": sum(oks) / len(oks)}
    return out
