"""Exact route: identifiers the question names verbatim (``HTTPDigestAuth.build_digest_header``,
``DEFAULT_REDIRECT_LIMIT``, ``click.echo``, `` `send()` ``, ``Type::method`` and the other member
spellings ``text.qualified_names`` reads as ``Type.method``), looked up in the symbol table. A plain
lower-case word counts only when written as code (backticks, a call, or after a dot), so "how is
the request sent" does not pull in every ``send``."""

from __future__ import annotations

import re

from coderag_retriever.index import RepoIndex
from coderag_retriever.query import Query
from coderag_retriever.text import qualified_names

_IDENT = re.compile(r"(`?)([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)(`?)(\(\))?")


def _code_like(word: str) -> bool:
    return (
        "_" in word
        or "." in word
        or (any(c.islower() for c in word) and any(c.isupper() for c in word[1:]))
    )


def mentioned(text: str) -> list[tuple[str, float]]:
    """Identifiers a question names, lower-cased, with how specific each mention is."""
    out: dict[str, float] = {}
    for m in _IDENT.finditer(qualified_names(text)):
        ident, quoted, called = m.group(2), bool(m.group(1) and m.group(3)), bool(m.group(4))
        if len(ident) < 3:
            continue
        parts = ident.split(".")
        for i in range(len(parts)):
            name = ".".join(parts[i:])
            plain = not _code_like(name) and not quoted and not called and i == 0
            if plain:
                continue
            specificity = len(parts) - i + (1.0 if _code_like(name) else 0.0)
            out[name.lower()] = max(out.get(name.lower(), 0.0), specificity)
    return sorted(out.items(), key=lambda t: -t[1])


def rank(query: Query, index: RepoIndex, n: int) -> list[tuple[int, float]]:
    """Units defining a named identifier, most specific mention first."""
    scored: dict[int, float] = {}
    for name, specificity in mentioned(query.text):
        for pos in index.by_name.get(name, ()):
            scored[pos] = max(scored.get(pos, 0.0), specificity)
    return sorted(scored.items(), key=lambda t: -t[1])[:n]
