"""Conversation sessions (G8): each /ask with a ``session_id`` stores its question and answer in
the catalog's database; a follow-up is rewritten by rules into a standalone retrieval query (seed
000 §4.3, seed 002 §3.2) and the last turns ride along in the prompt's messages."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from coderag.errors import Forbidden, InvalidInput
from coderag.language import HAN_RUN, STOP_EN, han_count, has_han
from coderag.schemas import Citation, Hit
from coderag.store import Catalog

SESSION_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
"""Session ids: 1-128 letters, digits, '.', '_' or '-'."""

RECENT_TURNS = 6
"""Turns read back per request: the rewrite uses the last two, the prompt up to all of them."""

KEPT_TURNS = 200
"""Turns stored per session and repository; older ones are pruned."""

HISTORY_SHARE = 0.15
"""Share of the model window that earlier turns may fill in the prompt."""


@dataclass
class Turn:
    """One stored message: the user's question or the final answer."""

    role: str
    content: str
    ts: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def symbols(self) -> list[str]:
        """Symbols an answer cited, first cited first."""
        return list(self.meta.get("symbols") or [])

    @property
    def query(self) -> str:
        """The standalone retrieval query a question was rewritten to."""
        return str(self.meta.get("query") or self.content)


def check_session_id(value: str) -> str:
    """``value`` if it is a valid session id, else InvalidInput saying what is allowed."""
    if not SESSION_ID.fullmatch(value):
        raise InvalidInput(
            "session_id must be 1-128 characters of letters, digits, '.', '_' or '-'"
        )
    return value


def claim(catalog: Catalog, session_id: str, user: str) -> None:
    """Make ``user`` the owner of a new session; Forbidden if another user owns it."""
    if catalog.sessions.owner(session_id, user) != user:
        raise Forbidden(
            f"session_id {session_id!r} belongs to another user; start your own with a new id"
        )


def recent(catalog: Catalog, session_id: str, repo: str, limit: int = RECENT_TURNS) -> list[Turn]:
    """The last ``limit`` turns of a session about ``repo``, oldest first (none if it is new)."""
    rows = catalog.sessions.last_turns(session_id, repo, limit)
    return [Turn(r.role, r.content, r.ts, json.loads(r.meta)) for r in reversed(rows)]


def append(
    catalog: Catalog,
    session_id: str,
    repo: str,
    *,
    question: str,
    query: str,
    answer: str,
    symbols: list[str],
) -> None:
    """Store one exchange and prune the session to ``KEPT_TURNS``."""
    turns = [
        ("user", question, json.dumps({"query": query})),
        ("assistant", answer, json.dumps({"symbols": symbols})),
    ]
    catalog.sessions.add_turns(session_id, repo, turns, KEPT_TURNS)


def cited_symbols(citations: Iterable[Citation], hits: list[Hit]) -> list[str]:
    """The symbols of the hits each citation falls in, in citation order, without repeats."""
    out: list[str] = []
    for c in citations:
        for h in hits:
            same = h.file == c.file
            if same and h.start_line <= c.end_line and c.start_line <= h.end_line:
                if h.symbol not in out:
                    out.append(h.symbol)
                break
    return out


# --- follow-up rewriting -------------------------------------------------------------------------

_NOUN_EN = (
    r"(?:function|method|func|class|type|struct|interface|module|file|code|one|variable|"
    r"constant|endpoint|handler|service|call)"
)
_NOUN_ZH = r"(?:函数|方法|类|接口|模块|文件|代码|变量|常量|结构体|服务|类型)"
_REFERENCES = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"\b((?:this|that|the same|the above)\s+{_NOUN_EN}s?)\b",
        r"\b(its|their|it|they|them)\b",
        r"\b(?:does|do|did|is|was|about|calls?|uses?|changed?|changes)\s+(this|that)\b",
        r"\b(this|that)\s*(?:[?.!,;]|$)",
        rf"((?:这个|那个){_NOUN_ZH}?|(?:该|此|上面的?){_NOUN_ZH}|它们?的?)",
    )
)
"""References to the previous subject ("it", "its", "this function", "它", "这个函数"); group 1 is
the words to replace. Bare "this"/"that" count only as an object or at the end, so "the code that
parses" is no reference."""

_POSSESSIVE = frozenset({"its", "their"})

_FOLLOW_UP_OPENER = re.compile(
    r"^\s*(?:and what about|what about|how about|and|also|what if"
    r"|那么?(?![个些])|还有|另外|以及)\s*",
    re.IGNORECASE,
)
_FOLLOW_UP_CLOSER = re.compile(r"呢\s*[?？。.!！]*\s*$")
SHORT_WORDS = 8
"""A follow-up with at most this many words (or twice as many Han characters) is "short"."""

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*|" + HAN_RUN.pattern)
_STOP_ZH = re.compile(
    r"为什么|怎么样|怎么|如何|哪里|哪儿|哪个|哪些|什么|是否|有没有|是不是|在哪|吗|呢|吧|的|了|是|在|从|被|由|把|会|要|能|请问|一下"
)


def _symbol_words(symbol: str) -> str:
    """A symbol as a query word: ``(*Service).ProcessOrder`` -> ``Service.ProcessOrder``."""
    return re.sub(r"[()*&]", "", symbol).strip(".") or symbol


def key_terms(question: str) -> list[str]:
    """The content words of a question: English stop words and Chinese question words dropped."""
    terms: list[str] = []
    for word in _WORD.findall(question):
        if has_han(word[0]):
            terms += [t for t in _STOP_ZH.split(word) if t]
        elif word.lower() not in STOP_EN:
            terms.append(word)
    return list(dict.fromkeys(terms))


OWN_SUBJECT = 2
"""A follow-up with this many content words of its own has its own subject."""

_SUBJECTLESS_EN = frozenset(
    {
        *("and", "also", "then", "so", "last", "latest", "recently", "recent", "first", "ever"),
        *("change", "changed", "changes", "modified", "modify", "touched", "edited", "exactly"),
        *("add", "added", "introduced", "wrote", "written", "write", "created", "mean", "means"),
        *("return", "returns", "returned", "do", "does", "did", "work", "works", "happen"),
        *("called", "call", "calls", "used", "use", "uses", "defined", "implemented", "happens"),
    }
)
"""Words that leave a question about "it" without a subject: what was done to it, or asked."""

_SUBJECTLESS_ZH = re.compile(
    r"谁|最后|最近|最早|第一次|修改|改动|改过|改|添加|加入|引入|加|写|返回|调用|用|做|作用|工作|"
    r"原理|干|时候|时间|什么|怎么|如何|在哪里|在哪儿|在哪|哪里|哪儿|那|还有|又|和|并且|以及|吗|呢|吧|的|了|是|被|在|过"
)
"""Chinese words that leave a question about 它 without a subject of its own."""


def needs_antecedent(query: str) -> str | None:
    """The reference ("it", "this function", "它") of a question about nothing else, which only
    an earlier turn can resolve ("And who last changed it?", "What does it return?"); None
    when the question has a subject of its own ("How does it parse the config file?")."""
    found = [m for m in (p.search(query) for p in _REFERENCES) if m]
    if not found:
        return None
    rest = query
    for m in found:
        rest = rest.replace(m.group(1), " ")
    if has_han(rest):
        return None if has_han(_SUBJECTLESS_ZH.sub("", rest)) else found[0].group(1)
    own = [t for t in key_terms(rest) if t.lower() not in _SUBJECTLESS_EN]
    return None if own else found[0].group(1)


def _named(term: str) -> bool:
    """Whether a word names a thing (``CORS``, ``parse_args``, ``Router.app``, a Chinese noun
    phrase) rather than describing (``decide``, ``allowed``)."""
    return has_han(term) or any(c.isupper() for c in term) or "_" in term or "." in term


def _is_short(text: str) -> bool:
    han = han_count(text)
    words = len(re.findall(r"[A-Za-z0-9_]+", text))
    return words + han / 2 <= SHORT_WORDS


def rewrite(query: str, turns: list[Turn]) -> str:
    """A standalone retrieval query for a follow-up, by rules: a reference ("it", "this
    function", "它") becomes the last answer's first cited symbol (else the previous question's
    subject); a short follow-up ("what about its error handling?") is prefixed with the previous
    question's key terms. A question that stands alone is returned unchanged."""
    last_q = next((t for t in reversed(turns) if t.role == "user"), None)
    if last_q is None:
        return query
    last_a = next((t for t in reversed(turns) if t.role == "assistant"), None)
    subject = key_terms(last_q.query)
    referent = _symbol_words(last_a.symbols[0]) if last_a and last_a.symbols else None
    opener = _FOLLOW_UP_OPENER.match(query)
    closer = _FOLLOW_UP_CLOSER.search(query)
    found = [m for m in (p.search(query) for p in _REFERENCES) if m]
    reference = min(found, key=lambda m: m.start(1)) if found else None
    short = _is_short(query) and bool(reference or (opener and opener.group()) or closer)
    if not reference and not short:
        return query
    text = query
    if reference:
        name = referent or " ".join(subject)
        if not name:
            return query
        start, end = reference.span(1)
        said = reference.group(1)
        if said.endswith("的"):
            name += "的"
        elif said.lower() in _POSSESSIVE:
            name += "'s"
        text = text[:start] + name + text[end:]
    if short:
        text = _FOLLOW_UP_OPENER.sub("", text, count=1)
        prefix = [t for t in subject if t.lower() not in text.lower()]
        taken = {t.lower() for t in subject}
        if len([t for t in key_terms(text) if t.lower() not in taken]) >= OWN_SUBJECT:
            # "and where is the allowed origin checked?" has a subject of its own: the previous
            # question lends only the names its asker typed, or its units outrank the ones asked
            # for; never a symbol a rewrite put in its place ("who last changed it?" became
            # "... get_trusted_client_host?", which then led every later answer: issue 43's
            # second trial)
            typed = key_terms(last_q.content)
            prefix = [t for t in typed if _named(t) and t.lower() not in text.lower()]
        text = " ".join([*prefix, text.strip()])
    return text.strip() or query


def prompt_history(turns: list[Turn]) -> list[dict[str, str]]:
    """The turns as chat messages, starting with a question."""
    messages = [{"role": t.role, "content": t.content} for t in turns]
    while messages and messages[0]["role"] != "user":
        messages.pop(0)
    return messages


def fit_history(
    messages: list[dict[str, str]], count_tokens: Callable[[str], int], budget: int
) -> list[dict[str, str]]:
    """The most recent whole exchanges of ``messages`` that fit ``budget`` tokens."""
    kept: list[dict[str, str]] = []
    used = 0
    pairs = [messages[i : i + 2] for i in range(0, len(messages), 2)]
    for pair in reversed(pairs):
        cost = sum(count_tokens(m["content"]) + 4 for m in pair)
        if used + cost > budget:
            break
        kept = pair + kept
        used += cost
    return kept
