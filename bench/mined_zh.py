"""Mined questions put into Chinese (``bench/mine.py``): word by word through the project's own
vocabulary (``vocab_zh.tsv``, then CC-CEDICT read backwards), identifiers, acronyms and proper
nouns kept in Latin letters, and only where the retriever's own Chinese->English mapping gets
back most of the content words."""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

from coderag_retriever import dictionary as cedict
from coderag_retriever.text import STOP_WORDS, stem, zh_terms

ZH_MIN_RECOVERED = 0.6
"""Share of a question's content words the retriever must get back from its Chinese version."""

WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']*")
"""An English word."""

TOKEN = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|#|->)[A-Za-z_$][\w$]*)*(?:\(\))?|\S")
"""A word, a qualified name or call, or one other character."""

_CODE_TOKEN = re.compile(r"_|[a-z][A-Z]|[A-Z]{2,}[a-z]|(?:\.|::|#|->)[A-Za-z_]|\(\)$")
"""What makes a token an identifier: snake_case, camelCase, a qualified name, a call."""

FUNCTION_WORDS = dict(
    re.findall(
        r"(\w+)=(\S+)",
        "if=如果 when=当 whether=是否 not=不 no=没有 without=不带 with=带 and=和 or=或 "
        "for=为 from=从 into=到 by=通过 before=之前 after=之后 all=所有 each=每个 "
        "every=每个 this=这个 that=该 it=它 its=它的 which=哪个 only=只 also=也 can=可以 "
        "may=可能 must=必须 should=应该 will=将 than=比 as=作为 of=的 in=在 on=在 at=在 "
        "to=到 is=是 are=是 be=是 has=有 have=有 same=相同 any=任何 more=更多 one=一个 "
        "two=两个 given=给定 using=使用 until=直到 between=之间",
    )
)
"""English function words -> Chinese; they are not content words, so they never count for or
against a translation."""

DROPPED = frozenset({"a", "an", "the", "do", "does", "did", "was", "were", "been", "being"})
"""English words left out of a Chinese question (articles and auxiliaries)."""


@cache
def en_to_zh() -> dict[str, str]:
    """English word (stemmed) -> Chinese word. In order of preference: a hand-vocabulary term
    whose English list starts with the word (shorter list, shorter term, file order first); one
    that lists it further on (the hand vocabulary is about code, the dictionary is not); a
    CC-CEDICT entry one of whose glosses is exactly the word (computing senses, then words that
    are part of more compounds, earlier glosses, fewer glosses, shorter words first), since a
    looser match picks senses code never means ("intermediate" -> an egret)."""
    from coderag_retriever.text import zh_vocabulary

    best: dict[str, tuple] = {}

    def offer(word: str, key: tuple) -> None:
        if word not in best or key < best[word]:
            best[word] = key

    for order, (term, english) in enumerate(zh_vocabulary().items()):
        for pos, word in enumerate(english):
            offer(stem(word), (0 if pos == 0 else 1, len(english), len(term), order, term))
    rows = [
        m
        for line in cedict.source().read_text("utf-8").splitlines()
        if (m := cedict._LINE.match(line))
    ]
    exact: list[tuple[str, str, int, int, bool]] = []
    for m in rows:
        if not cedict.MIN_CHARS <= len(m.group(1)) <= cedict.MAX_CHARS:
            continue
        glosses = [g for g in m.group(2).split("/") if g and not cedict.SKIP_GLOSS.search(g)]
        computing = any(cedict.COMPUTING.search(g) for g in glosses)
        for pos, gloss in enumerate(glosses):
            plain = re.sub(r"^to ", "", cedict._PAREN.sub(" ", gloss).strip().lower()).strip()
            if re.fullmatch(r"[a-z]+", plain):
                exact.append((stem(plain), m.group(1), pos, len(glosses), computing))
    # how many headwords contain a word: common words are parts of many compounds (a frequency
    # list the dictionary does not ship), so "standard" becomes 标准, not 本位
    wanted = {zh for _, zh, _, _, _ in exact}
    compounds: Counter[str] = Counter()
    for m in rows:
        head = m.group(1)
        for size in range(cedict.MIN_CHARS, min(len(head), cedict.MAX_CHARS) + 1):
            for i in range(len(head) - size + 1):
                if head[i : i + size] in wanted:
                    compounds[head[i : i + size]] += 1
    for word, zh, pos, n, computing in exact:
        offer(word, (2 if computing else 3, -compounds[zh], pos, n, len(zh), zh))
    return {word: key[-1] for word, key in best.items()}


def is_identifier(token: str) -> bool:
    """Whether a token is written as code: snake_case, camelCase, a qualified name, a call."""
    return bool(_CODE_TOKEN.search(token))


def keeps_latin(token: str, index: int) -> bool:
    """Whether a token stays in Latin letters in a Chinese question: identifiers, acronyms and
    proper nouns (capitalised past the first word: Linux, JSON, Logrus)."""
    return (
        is_identifier(token)
        or (len(token) > 1 and token.isupper())
        or (index > 0 and token[0].isupper())
        or any(ch.isdigit() for ch in token)
    )


def translate(query: str) -> str | None:
    """The query in Chinese, word by word through the dictionary, identifiers kept in Latin
    letters; None unless the retriever's own Chinese->English mapping gets back at least
    ``ZH_MIN_RECOVERED`` of the content words."""
    table = en_to_zh()
    pieces: list[str] = []
    content: list[str] = []
    for index, token in enumerate(TOKEN.findall(query)):
        if not re.match(r"[A-Za-z_$]", token):
            pieces.append({",": "，", ".": "。", "?": "？", ":": "：", ";": "；"}.get(token, ""))
            continue
        low = token.lower()
        if keeps_latin(token, index):
            pieces.append(f" {token} ")
        elif low in FUNCTION_WORDS:
            pieces.append(FUNCTION_WORDS[low])
        elif low in DROPPED or low in STOP_WORDS:
            continue
        else:
            content.append(stem(low))
            zh = table.get(stem(low)) or table.get(low)
            pieces.append(zh if zh else f" {token} ")
    if not content:
        return None
    text = re.sub(r" +", " ", "".join(pieces)).strip()
    text = re.sub(r" ([，。？：；])", r"\1", text)
    back = {stem(w) for w in zh_terms(text, hand=True, dictionary=True)}
    recovered = sum(w in back for w in content)
    if recovered / len(content) < ZH_MIN_RECOVERED:
        return None
    return text
