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
from functools import cache

from coderag.language import STOP_EN, has_han
from coderag.schemas import Hit
from coderag.terms import missing_terms, refusing
from coderag.words import WORD
from coderag_generator import prompts
from coderag_generator.refusal_rules import all_rules
from coderag_generator.window import is_history_question

UNSAFE, VAGUE = "unsafe", "vague"
NO_HITS, SCORE_GATE, ABSENT_TERM = "no_hits", "score_gate", "absent_term"
"""The ``reason`` of each pre-model answer."""


_CLAUSE_END = re.compile(
    r"\s*(?:it|them|掉|去|过去|它们?)?\s*(?:[?？。.!！,，;；]|吗|呢|$)", re.IGNORECASE
)
_PUNCT = re.compile(r"[,.;:?!，。；：？！]")
_IDENT = re.compile(r"[A-Za-z_][\w.]*(?:\(\))?$")


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
    imperative) with a verb of getting around, switching off, or showing a secret, or says what
    the asker wants for themselves ("I'd like to find the input that makes it true", "我想"),
    and says nothing of defending: what a trace or history question needs for the learned rule
    to decline it."""
    every = all_rules()
    if any(p.search(query) for r in every for p in r.defense):
        return False
    if any(p.search(query) for r in every for p in r.wish):
        return True
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
    if missing and (below_gate or refusing(missing, weak)):
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
