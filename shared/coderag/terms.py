"""What a question names that the code must mention (issue 41): ``named_terms`` (identifiers,
acronyms, capitalised words; never an example value, a quantity, a file name or a guess),
``missing_terms`` (those none of the retrieved units mentions) and ``refusing`` (whether they
refuse the question: an identifier or acronym always, a word only when the hits are weak).

One reading for every entry point: /ask's refusal and /search's ``below_gate`` both call it.
The words it treats as generic, as example markers and as hedges are data:
``terms_<lang>.toml``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from functools import cache
from importlib import resources

from coderag.language import has_han
from coderag.schemas import Hit
from coderag.words import stem, words

LANGUAGES = ("en", "zh")
"""The languages with a ``terms_<lang>.toml``."""

FUZZY_CUTOFF = 0.85
"""A named term this similar to a word of the hits counts as present (typos of identifiers)."""

FUZZY_MIN_CHARS = 6
"""Shorter terms must match exactly: "OAuth2" must not pass for "auth"."""

_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+#/-]*[A-Za-z0-9_+#]|[A-Za-z0-9_]")
_SENTENCE_START = "'\"“‘`([{.?!:;,，。？！：；、（"
_LITERAL = re.compile(r"[+-]?\d+(?:[-.:,/]+\d+)+")
"""A number, version, date or time the question writes (``3..7``, ``1.2.3``, ``2024-01-15``)."""
_QUANTITY = re.compile(
    r"\d+(?:\.\d+)?(?:[nmuµ]?s|sec|min|[hdwkmgt]|[kmgt]i?b|px|em|rem|x|fps|hz|rps)",
    re.IGNORECASE,
)
"""A quantity with its unit (``30s``, ``500ms``, ``10MB``): a value, not a name."""
_DATETIME = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
)
"""An ISO date or timestamp the question offers as an input."""
_ADDRESS = re.compile(
    r"(?:[\w-]+\.)+(?:com|org|net|io|dev|local|internal|test|example|localhost)\b\S*"
)
"""A host name (``api.example.com/v2``): an address the question imagines; so is a path that
starts with "/" (``/v2/users``). ``HTTP/2`` and ``undo/redo`` are not: they name things."""
_QUOTED = re.compile(r"(?<![A-Za-z])'[^'\n]*'(?![A-Za-z])|\"[^\"\n]*\"|“[^”\n]*”|‘[^’\n]*’")
"""A quoted string; an apostrophe inside a word ("the user's") opens none."""
_OPENS = {"(": ")", "[": "]", "{": "}", "<": ">"}
_QUOTES = " '\"“‘`"


@dataclass(frozen=True)
class TermData:
    """One language's ``terms_<lang>.toml``."""

    generic: frozenset[str]
    example: tuple[str, ...]
    hedge: tuple[str, ...]
    extensions: frozenset[str]


@cache
def data(lang: str) -> TermData:
    """The words of ``terms_<lang>.toml``."""
    text = resources.files("coderag").joinpath(f"terms_{lang}.toml").read_text("utf-8")
    absent = tomllib.loads(text)["absent"]
    return TermData(
        generic=frozenset(w.lower() for w in absent.get("generic", [])),
        example=tuple(w.lower() for w in absent.get("example", [])),
        hedge=tuple(w.lower() for w in absent.get("hedge", [])),
        extensions=frozenset(e.lower() for e in absent.get("extensions", [])),
    )


def all_data() -> list[TermData]:
    """Every language's words (a question may mix them)."""
    return [data(lang) for lang in LANGUAGES]


def named_terms(query: str) -> list[str]:
    """The specific things a question names: identifiers (``parse_args``, ``Session.get``),
    acronyms and camel case (``YAML``, ``PowerShell``), capitalised words inside a sentence,
    words with digits (``HTTP/2``, ``OAuth2``), and any Latin word of a Chinese question.
    Values are not among them: a number (a count, a port, a status code: ``503``), a literal
    such as ``3..7``, ``1.5`` or a date, a quantity (``30s``, ``10MB``), an address
    (``api.example.com/v2``), a quoted string, the arguments of code the question writes, a
    term right after "like", "e.g." or "例如", or a half-remembered name ("walkRoutes or
    similar") is an input the question imagines or a guess, which the code need not spell out
    (issue 31: such values were most of the answerable questions refused)."""
    chinese = has_han(query)
    rule_sets = all_data()
    generic = set().union(*(r.generic for r in rule_sets))
    examples = tuple(w for r in rule_sets for w in r.example)
    hedges = tuple(w for r in rule_sets for w in r.hedge)
    extensions = frozenset(e for r in rule_sets for e in r.extensions)
    inputs = _example_spans(query)
    # a name the question also writes as an input ('session', then name=session) is one
    given = {t.group().lower() for a, b in inputs for t in _TOKEN.finditer(query[a:b])}
    out: list[str] = []
    for m in _TOKEN.finditer(query):
        term = m.group().rstrip(".")
        before = query[: m.start()].rstrip()
        if (
            _LITERAL.fullmatch(term)
            # a count, a port, a status code, "13-character", "64-bit", 0xFF: a value
            or term[0].isdigit()
            or query[m.start() - 1 : m.start()] == "\\"  # an escape the question quotes: \x1b
            or _is_file(term, extensions)
            or _QUANTITY.fullmatch(term)
            or _ADDRESS.fullmatch(term)
            or query[m.start() - 1 : m.start()] == "/"
            or any(a <= m.start() < b for a, b in inputs)
            or term.lower() in given
            or _follows_example(before, examples)
            or _hedged(query[m.end() :], hedges)
        ):
            continue
        starts_sentence = not before or before[-1] in _SENTENCE_START
        shaped = (
            any(c.isupper() for c in term[1:])
            or (term[0].isupper() and not starts_sentence)
            or any(c.isdigit() for c in term)
            or "_" in term
            or "." in term
        )
        if len(term) >= 2 and (shaped or chinese) and term.lower() not in generic:
            out.append(term)
    return list(dict.fromkeys(out))


def _is_file(term: str, extensions: frozenset[str]) -> bool:
    """Whether a term names a file (``tax.py``, ``billing/tax.py``, ``package.json``): where to
    look, which the retrieved units need not spell out (issue 41: file names were refused as
    absent terms); ``Session.get`` is no file, its suffix no file extension."""
    name = term.rsplit("/", 1)[-1]
    stem_, dot, suffix = name.rpartition(".")
    return bool(dot and stem_) and suffix.lower() in extensions


def _example_spans(query: str) -> list[tuple[int, int]]:
    """Where the question writes example inputs: quoted strings, and the arguments of code it
    writes (``client.post(url, json=payload)``, ``mounts={...}``, ``helper<Person>()``); the
    called name stays a claim. A bracket after a space ("(a and b)") or a full-width one is
    prose, not code."""
    spans = [m.span() for m in _QUOTED.finditer(query)]
    spans += [m.span() for m in _DATETIME.finditer(query)]
    for i, ch in enumerate(query):
        if ch in _OPENS and i and (query[i - 1].isalnum() or query[i - 1] in "_=.:"):
            end = _closing(query, i)
            spans.append((i, end))
    return spans


def _closing(text: str, start: int) -> int:
    """The index after the bracket that closes the one at ``start`` (the end of the text when
    it is never closed)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] in _OPENS:
            depth += 1
        elif text[i] in _OPENS.values():
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _hedged(after: str, hedges: tuple[str, ...]) -> bool:
    """Whether a half-remembered name follows: "walkRoutes or similar", "copyConf 之类"."""
    text = after.lower().lstrip(" \t'\"`’”,，")
    return any(text.startswith(h) for h in hedges)


def _follows_example(before: str, markers: tuple[str, ...]) -> bool:
    """Whether the text before a term ends with an example marker ("like", "such as", "比如"),
    a quote between them allowed; a Latin marker must start a word ("unlike" is not "like")."""
    text = before.lower().rstrip(_QUOTES)
    for marker in markers:
        if text.endswith(marker):
            start = len(text) - len(marker)
            if not marker[0].isascii() or start == 0 or not text[start - 1].isalnum():
                return True
    return False


def _alnum(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def missing_terms(query: str, hits: Sequence[Hit]) -> list[str]:
    """Named terms of the question that no hit mentions in its code, path or symbol; a dotted
    or hyphenated term is present when each of its parts is, a part when it, its letters and
    digits, its stem (a plural, a verb ending) or a close spelling of it is; a slashed term
    (``v3/v5``, ``BSD/macOS``, ``moveTo/copyTo``) names alternatives and is present when one of
    them is (``HTTP/2``, a name and its version, stays one term)."""
    raw = "\n".join(f"{h.text or ''}\n{h.file}\n{h.symbol}" for h in hits)
    hay = raw.lower()
    hay_alnum = _alnum(hay)
    vocabulary: list[str] | None = None
    stems: set[str] | None = None

    def present(part: str) -> bool:
        nonlocal vocabulary, stems
        low = part.lower()
        if low in hay or (_alnum(low) and _alnum(low) in hay_alnum):
            return True
        if stem(low) in (stems := stems if stems is not None else words(raw)):
            return True  # "tokens" for token, "Sessions" for sessionStore
        if len(low) >= FUZZY_MIN_CHARS:
            if vocabulary is None:
                vocabulary = list(set(re.findall(r"\w+", hay)))
            if get_close_matches(low, vocabulary, n=1, cutoff=FUZZY_CUTOFF):
                return True
        return False

    missing = []
    for term in named_terms(query):
        options = term.split("/")
        if len(options) < 2 or any(o.isdigit() or len(o) < 2 for o in options):
            options = [term]
        for option in options:
            parts = [p for p in re.split(r"[.\-]|\(\)", option) if len(p) >= 2] or [option]
            if all(present(part) for part in parts):
                break
        else:
            missing.append(term)
    return missing


_IDENTIFIER = re.compile(r"[a-z][A-Z]|_|\w\.\w|\(\)")
"""The shape of a code identifier among the named terms: camelCase, snake_case, a dotted path
or a call (``cloneDeep``, ``max_wait``, ``io.Reader``, ``find()``)."""

_ACRONYM = re.compile(r"[A-Z][A-Z0-9]{2,}")
"""An acronym of three or more capitals (``YAML``, ``CSRF``, ``LRU``)."""


def names_a_thing(term: str) -> bool:
    """Whether a missing term names something the code would spell if it had it (an identifier
    or an acronym), so its absence refuses whatever the hits; a capitalised word (``Android``,
    ``Linux``, ``Redis``) is as often the setting a question describes (issue 41: on the
    tuning splits such words refused 3 answerable questions for each 2 absent ones)."""
    return bool(_IDENTIFIER.search(term) or _ACRONYM.fullmatch(term))


def refusing(missing: Sequence[str], weak: bool) -> bool:
    """Whether these missing terms refuse a question: an identifier or acronym whatever the
    hits, a word (``Android``, ``Linux``) only when the retriever finds the hits ``weak``."""
    return bool(missing) and (weak or any(names_a_thing(t) for t in missing))
