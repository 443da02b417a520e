"""Tokens for matching code and questions: identifier splitting, stop words, light stemming, and a
Chinese -> English code vocabulary (``vocab_zh.tsv``) so Chinese questions reach English code."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from importlib import resources

from coderag.auth import REF_SEPARATOR
from coderag.language import HAN_RUN, has_han
from coderag.words import parts, stem
from coderag_retriever import dictionary as cedict

Known = Callable[[str], bool]
"""Whether a token is in a repository's code (its keyword postings hold it)."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
# a Go receiver before its method, not a call's arguments: ``(*T).M`` but not ``f(x).y``
_RECEIVER = r"(?<![\w)\]])\(\s*\*?\s*([A-Za-z_]\w*)\s*\)(?=\.[A-Za-z_])"
# joined to names on both sides, so ``C# code``, ``#12``, ``a -> b`` and ``fe80::1`` stay prose
_MEMBER_OP = r"(?<=\w)(?:::|->|#)(?=[A-Za-z_])"
# JavaScript's ``X.prototype.m`` is the method the parser names ``X.m``
_PROTOTYPE = r"(?<=\w)\.prototype(?=\.[A-Za-z_$])"
_MEMBER = re.compile(f"{_RECEIVER}|{_MEMBER_OP}|{_PROTOTYPE}")

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "or",
        "not",
        "no",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "where",
        "when",
        "why",
        "how",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "they",
        "them",
        "his",
        "her",
        "their",
        "if",
        "then",
        "else",
        "than",
        "so",
        "as",
        "into",
        "about",
        "over",
        "under",
        "any",
        "all",
        "each",
        "every",
        "some",
        "such",
        "use",
        "used",
        "using",
        "self",
        "none",
        "true",
        "false",
        "return",
        "returns",
        "happen",
        "happens",
        "happened",
        "code",
        "function",
        "method",
        "file",
        "files",
        "class",
        "def",
        "func",
        "var",
        "let",
        "const",
    ]
)
"""English words that carry nothing for code search (``get``/``use`` included: they match
everything)."""

ZH_STOP = (
    "怎么",
    "怎样",
    "如何",
    "哪里",
    "哪儿",
    "哪个",
    "哪些",
    "是否",
    "什么",
    "为什么",
    "的",
    "了",
    "吗",
    "呢",
    "在",
    "是",
    "会",
    "有",
    "和",
    "与",
    "及",
    "时候",
    "时",
    "里",
    "中",
    "一个",
    "这个",
    "那个",
    "被",
    "把",
    "给",
    "就",
    "都",
    "也",
    "还",
    "要",
    "能",
    "可以",
)
"""Chinese function words dropped before matching."""


def split_identifier(word: str) -> list[str]:
    """``getHTTPResponse_code`` -> ``get http response code`` (``coderag.words.parts``)."""
    return parts(word)


def qualified_names(text: str) -> str:
    """``text`` with ``T::m``, ``T#m``, ``o->m``, ``(*T).m``, ``(T).m`` and
    ``T.prototype.m`` written ``T.m``."""
    return _MEMBER.sub(lambda m: m.group(1) or ("" if m.group(0) == ".prototype" else "."), text)


@cache
def zh_vocabulary() -> dict[str, tuple[str, ...]]:
    """Chinese term -> English code words, from ``vocab_zh.tsv``."""
    vocab: dict[str, tuple[str, ...]] = {}
    text = resources.files("coderag_retriever").joinpath("vocab_zh.tsv").read_text("utf-8")
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        term, _, words = line.partition("\t")
        vocab[term.strip()] = tuple(words.split())
    return vocab


def zh_terms(
    text: str, hand: bool = True, dictionary: bool = False, known: Known | None = None
) -> list[str]:
    """English words for the Chinese in ``text``, in order (``zh_words``, flattened)."""
    return [w for _, english in zh_words(text, hand, dictionary, known) for w in english]


def zh_words(
    text: str, hand: bool = True, dictionary: bool = False, known: Known | None = None
) -> list[tuple[str, tuple[str, ...]]]:
    """The Chinese words of ``text`` with their English, in order: by longest match against the
    hand vocabulary (``hand``), then, where it matched nothing, against CC-CEDICT
    (``dictionary``); characters neither covers are left out. With ``known`` (whether a token
    is in the repository's code), a dictionary word's English is the candidates, over all its
    senses, that the repository's code uses, at most ``cedict.MAX_WORDS``; its usual glosses
    where the code uses none."""
    vocab = zh_vocabulary() if hand else {}
    longest = max(map(len, vocab), default=1)
    out: list[tuple[str, tuple[str, ...]]] = []
    for run in HAN_RUN.findall(text):
        i, rest = 0, ""
        while i < len(run):
            for size in range(min(longest, len(run) - i), 0, -1):
                piece = run[i : i + size]
                if piece in vocab:
                    out += [*_glossed(rest, dictionary, known), (piece, vocab[piece])]
                    i, rest = i + size, ""
                    break
            else:
                rest += run[i]
                i += 1
        out += _glossed(rest, dictionary, known)
    return out


def _glossed(rest: str, dictionary: bool, known: Known | None) -> list[tuple[str, tuple[str, ...]]]:
    if not (dictionary and rest):
        return []
    usual, every = cedict.entries(STOP_WORDS), cedict.candidates(STOP_WORDS)
    out = []
    for word in cedict.words_of(rest, STOP_WORDS, frozenset(ZH_STOP)):
        own = [w for w in every.get(word, ()) if any(map(known, code_tokens(w)))] if known else []
        out.append((word, tuple(own[: cedict.MAX_WORDS]) or usual[word]))
    return out


def has_chinese(text: str) -> bool:
    """Whether the text contains Han characters."""
    return has_han(text)


def code_tokens(text: str) -> list[str]:
    """Stemmed tokens of code or prose: identifiers split, whole identifiers kept too."""
    out: list[str] = []
    for word in _IDENT.findall(text):
        parts = split_identifier(word)
        if len(parts) > 1:
            out.append(word.lower())
        out += [stem(p) for p in parts if p not in STOP_WORDS and len(p) > 1]
    return out


NAME_KEPT_BELOW = 2
"""A question whose other tokens are fewer than this keeps its repository's name as a token."""


def without_name(tokens: list[str], repo: str, text: str) -> list[str]:
    """A question's tokens without the repository's own name (a ref's too: ``pino@v9``) when
    the question (``text``) uses it as a name and says more than that: "How does pino keep
    passwords out of the log?" asks about redaction in pino, and its name would draw the units
    called ``pino`` to the top (issue 43's fourth trial: express, got, pino and zod name their
    main export after the project); "How does pino work?" keeps it, and so does a common noun
    that happens to name the repository ("When does the shop ship parcels?" of ``shop``)."""
    bare = repo.split(REF_SEPARATOR, 1)[0]
    name = set(code_tokens(bare))
    if not name or not name <= set(tokens) or not _as_name(bare).search(text):
        return tokens
    rest = [t for t in tokens if t not in name]
    return rest if len(set(rest)) >= NAME_KEPT_BELOW else tokens


@cache
def _as_name(name: str) -> re.Pattern[str]:
    """The name written as a name: not after an article or demonstrative ("the shop")."""
    return re.compile(
        rf"(?<!\bthe )(?<!\ba )(?<!\ban )(?<!\bthis )(?<!\bthat )(?<![\w.]){re.escape(name)}(?!\w)",
        re.IGNORECASE,
    )


def query_tokens(
    text: str, vocab: bool = True, dictionary: bool = False, known: Known | None = None
) -> list[str]:
    """Tokens of a question: code tokens of its Latin words plus the English of its Chinese from
    the hand vocabulary (``vocab``) and CC-CEDICT (``dictionary``; ``known``: see ``zh_terms``)."""
    extra = " ".join(zh_terms(text, vocab, dictionary, known)) if has_chinese(text) else ""
    return code_tokens(text + " " + extra)
