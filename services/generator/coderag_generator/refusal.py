"""Answers decided before the model is called (G5, R11).

* unsafe: "how do I bypass the permission check?" is declined (``refused``, reason ``unsafe``),
  by these rules or by the retriever's learned rule on the question's vector, which reads the
  requests the rules were not written for;
* vague: "is this function safe?" gets a clarifying answer naming the dimensions to choose from
  (``clarify``, not refused);
* out of scope: no hits, the retriever's verdict that the code probably does not hold the answer
  (``below_gate``: the learned refusal rule or the score gate; reason ``score_gate``), or a named
  thing of the question that none of the retrieved code mentions (reason ``absent_term``) is
  refused without asking the model: an identifier or acronym (``cloneDeep``, ``YAML``) always, a
  word (``Android``, ``Redis``) only when the retriever finds the hits ``weak``; else the
  answer says first that the code may not hold it (``doubts``): a wrong refusal costs more than
  a doubtful answer (issue 41).

The word lists and patterns are data: ``prompts/refusal_rules_<lang>.txt`` (TOML). Contradictory
premises (seed 004 type C) are left to the model: rules cannot see what the code does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from functools import cache

from coderag.language import STOP_EN, has_han
from coderag.schemas import Hit
from coderag.words import WORD, stem, words
from coderag_generator import prompts
from coderag_generator.refusal_rules import all_rules
from coderag_generator.window import is_history_question

UNSAFE, VAGUE = "unsafe", "vague"
NO_HITS, SCORE_GATE, ABSENT_TERM = "no_hits", "score_gate", "absent_term"
"""The ``reason`` of each pre-model answer."""

FUZZY_CUTOFF = 0.85
"""A named term this similar to a word of the hits counts as present (typos of identifiers)."""

FUZZY_MIN_CHARS = 6
"""Shorter terms must match exactly: "OAuth2" must not pass for "auth"."""

_CLAUSE_END = re.compile(
    r"\s*(?:it|them|掉|去|过去|它们?)?\s*(?:[?？。.!！,，;；]|吗|呢|$)", re.IGNORECASE
)
_PUNCT = re.compile(r"[,.;:?!，。；：？！]")
_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+#/-]*[A-Za-z0-9_+#]|[A-Za-z0-9_]")
_IDENT = re.compile(r"[A-Za-z_][\w.]*(?:\(\))?$")
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
class Verdict:
    """A pre-model answer: the text and how the response marks it."""

    answer: str
    refused: bool
    clarify: bool
    reason: str


@cache
def _targets() -> tuple[tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]]:
    """The checks and the assets of both languages, gathered once per process."""
    every = all_rules()
    return tuple(p for r in every for p in r.check), tuple(p for r in every for p in r.asset)


def _acts_on(
    query: str, verbs: Sequence[re.Pattern[str]], targets: Sequence[re.Pattern[str]], window: int
) -> bool:
    """Whether a verb acts on a target: the target follows within ``window`` characters of the
    same clause, or precedes it that closely when the verb ends the clause."""
    spans = [m.span() for t in targets for m in t.finditer(query)]
    for verb in verbs:
        for m in verb.finditer(query):
            for start, end in spans:
                if m.end() <= start <= m.end() + window:
                    gap = query[m.end() : start]
                elif end <= m.start() and m.start() - end <= window:
                    if not _CLAUSE_END.match(query, m.end()):
                        continue
                    # "the permission check, how do I bypass it?": one comma may part them
                    gap = query[end : m.start()].replace(",", " ", 1).replace("，", " ", 1)
                else:
                    continue
                if not _PUNCT.search(gap):
                    return True
    return False


def is_unsafe(query: str) -> bool:
    """A request to get around a security control or at a secret (see the rules' [unsafe])."""
    every = all_rules()
    if any(p.search(query) for r in every for p in r.defense):
        return False
    if any(p.search(query) for r in every for p in r.alone):
        return True
    # a Chinese verb may act on an identifier the question writes in Latin letters: the targets
    # of both languages are read with each language's verbs
    checks, assets = _targets()
    for r in every:
        if not any(p.search(query) for p in r.ask):
            continue
        if _acts_on(query, r.strong, (*checks, *assets), r.window):
            return True
        if _acts_on(query, r.weak, checks, r.window):
            return True
    # "what's the production password", "list every key with its value": the disclosing verb asks
    return any(
        any(p.search(query) for p in r.value)
        and _acts_on(query, r.disclose, assets, r.disclose_window)
        for r in every
    )


def vague_judgement(query: str) -> tuple[str, str] | None:
    """``(word, dimensions)`` when the question is a judgement ("safe", "fast", ...) that names no
    dimension and no subject beyond at most one identifier; else None."""
    every = all_rules()
    found = next(
        ((j, m) for r in every for j in r.judgements if (m := j.pattern.search(query))), None
    )
    if found is None or any(p.search(query) for r in every for p in r.dimension):
        return None
    rest = query
    for r in every:
        for j in r.judgements:
            rest = j.pattern.sub(" ", rest)
        for p in r.filler:
            rest = p.sub(" ", rest)
    if has_han(rest):
        return None
    words = re.findall(r"[\w.()]+", rest)
    # one identifier may stay: "is parse_args correct?" still lacks the dimension
    if len(words) > 1 or (words and not _looks_like_identifier(words[0])):
        return None
    word = found[1].group()
    return word[:1].upper() + word[1:], found[0].dimensions


def _looks_like_identifier(word: str) -> bool:
    core = word.removesuffix("()")
    has_shape = "_" in core or "." in core.strip(".") or any(c.isupper() for c in core[1:])
    return bool(_IDENT.match(word)) and (has_shape or word.endswith("()"))


def describes(query: str) -> bool:
    """Whether the question asks how the code is or was rather than for something done: a
    history question ("who last changed the CORS middleware?") or a trace ("trace the calls
    from login to the token check"). Such questions name the controls they describe, and the
    learned rule, which reads topics as much as intent, declined 17 of 68 traces (issue 41)."""
    if is_history_question(query):
        return True
    return any(p.search(query) for r in all_rules() for p in r.ordinary)


def intends(query: str) -> bool:
    """Whether the question asks for something done ("how do I", "so I can", "help me", an
    imperative) with a verb of getting around, switching off, or showing a secret, and says
    nothing of defending: what a trace or history question still needs to be declined."""
    every = all_rules()
    if any(p.search(query) for r in every for p in r.defense):
        return False
    if not any(p.search(query) for r in every for p in (*r.ask, *r.purpose)):
        return False
    if any(p.search(query) for r in every for p in (*r.strong, *r.weak, *r.alone)):
        return True
    _, assets = _targets()
    shows = any(p.search(query) for r in every for p in r.disclose)
    return shows and any(p.search(query) for p in assets)


def declines(query: str, learned: bool = False) -> bool:
    """Whether to decline as unsafe: the hand rules say so, or the retriever's ``learned``
    verdict (``coderag_retriever.unsafe``) does on a question that does not just describe the
    code or that ``intends`` harm all the same ("trace the login flow so I can skip the MFA
    step")."""
    return is_unsafe(query) or (learned and (not describes(query) or intends(query)))


def screen(query: str, lang: str, unsafe: bool = False) -> Verdict | None:
    """The unsafe and vague rules, which need no retrieval; ``unsafe`` is the retriever's
    learned verdict, which declines what these rules miss (see ``declines``)."""
    if declines(query, unsafe):
        return Verdict(prompts.load("unsafe", lang), True, False, UNSAFE)
    if judgement := vague_judgement(query):
        word, dimensions = judgement
        text = prompts.load("clarify", lang).format(word=word, dimensions=dimensions)
        return Verdict(text, False, True, VAGUE)
    return None


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
    rule_sets = all_rules()
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


_ZH_ASKING = re.compile(
    r"在哪里|在哪儿|哪里|哪儿|怎么|如何|是什么|什么|为什么|吗|呢|的|了|[？?。！，,]"
)


def looked_for(query: str, lang: str, searched: Sequence[str] = ()) -> str:
    """What the refused question looked for: the words the retriever ``searched`` by (a Chinese
    word with its English) when it sent them, else its content words (English) or the question
    without its asking words (Chinese)."""
    if searched:
        what = ("、" if lang == "zh" else ", ").join(searched)
    elif lang == "zh":
        what = " ".join(_ZH_ASKING.sub(" ", query).split())
    else:
        what = ", ".join(dict.fromkeys(w for w in WORD.findall(query) if w.lower() not in STOP_EN))
    return prompts.load("looked_for", lang).format(terms=what or query.strip())


def _nothing(query: str, lang: str, reason: str, searched: Sequence[str] = ()) -> Verdict:
    sep = "" if lang == "zh" else " "
    text = prompts.load("no_context", lang) + sep + looked_for(query, lang, searched)
    return Verdict(text, True, False, reason)


def gate(
    query: str,
    hits: Sequence[Hit],
    lang: str,
    below_gate: bool,
    searched: Sequence[str] = (),
    weak: bool = True,
) -> Verdict | None:
    """Refuse when the hits cannot hold the answer: none at all, a named term that no hit
    mentions (checked first: its refusal says what is missing), or the retriever's verdict
    ``below_gate`` (which never holds when the question names an identifier of the code); a
    refusal says what was ``searched`` for (the retriever's words, when it sent them). A missing
    word (``Android``, ``Linux``, ``macOS``) refuses only when the retriever finds the hits
    ``weak`` (``CODERAG_ABSENT_TERM_FLOOR``): a question that names its platform in passing is
    answered, with the doubt sentence first (``doubts``); a missing identifier or acronym
    (``cloneDeep``, ``io.Reader``, ``YAML``) refuses whatever the hits (issue 41)."""
    if not hits:
        return _nothing(query, lang, NO_HITS, searched)
    missing = missing_terms(query, hits)
    if missing and (below_gate or weak or any(names_a_thing(t) for t in missing)):
        sep = "、" if lang == "zh" else ", "
        terms = sep.join(missing)
        return Verdict(
            prompts.load("absent_term", lang).format(terms=terms), True, False, ABSENT_TERM
        )
    return _nothing(query, lang, SCORE_GATE, searched) if below_gate else None


def doubts(query: str, hits: Sequence[Hit]) -> bool:
    """Whether an answer that ``gate`` let through should still say first that the code may
    not hold it: a term the question names is in none of the hits."""
    return bool(hits) and bool(missing_terms(query, hits))
