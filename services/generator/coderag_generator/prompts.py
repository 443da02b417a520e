"""Prompt texts, kept as files under ``prompts/`` (one per purpose and language)."""

from __future__ import annotations

from functools import cache
from importlib import resources

LANGUAGES = ("en", "zh")
"""Languages with a full prompt set; Chinese questions get Chinese answers."""


@cache
def load(name: str, lang: str) -> str:
    """The text of ``prompts/<name>_<lang>.txt``."""
    if lang not in LANGUAGES:
        lang = "en"
    path = resources.files("coderag_generator").joinpath(f"prompts/{name}_{lang}.txt")
    return path.read_text("utf-8").strip()


def is_refusal(answer: str) -> bool:
    """Whether an answer is (or opens with) a refusal sentence of either language."""
    head = answer.strip().strip("\"“”'").lower()
    sentences = [load("refusal", lang).rstrip(".。").lower() for lang in LANGUAGES]
    return any(head.startswith(s) for s in sentences) or "未在当前代码片段中体现" in head[:40]
