"""The language of a question: the one test for Chinese (Han characters) and the one list of
English words that carry no subject in a question."""

from __future__ import annotations

import re
from importlib import resources

HAN = re.compile(r"[\u3400-\u9fff]")
"""One Han character (CJK unified ideographs and extension A)."""

HAN_RUN = re.compile(HAN.pattern + "+")
"""A run of Han characters."""

_STOP_TEXT = resources.files("coderag").joinpath("stopwords_en.txt").read_text("utf-8")

STOP_EN = frozenset(
    w for line in _STOP_TEXT.splitlines() if not line.startswith("#") for w in line.split()
)
"""English words that carry no subject in a question (what it asks about is what is left)."""


def has_han(text: str) -> bool:
    """Whether the text contains Chinese (Han characters)."""
    return HAN.search(text) is not None


def han_count(text: str) -> int:
    """How many Han characters the text holds."""
    return len(HAN.findall(text))


def language(text: str) -> str:
    """``zh`` when the text holds Chinese, else ``en``."""
    return "zh" if has_han(text) else "en"
