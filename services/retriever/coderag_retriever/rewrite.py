"""LLM query rewriting (optional, ``CODERAG_QUERY_REWRITE=llm``): an OpenAI-compatible server
(``CODERAG_LLM_BASE_URL``: vLLM, Ollama, llama.cpp's server) turns a question into a few short
code-search queries, which the routes ``coderag.routes.REWRITE`` names (keyword and vector)
search beside the question itself.

The rules that always run are elsewhere: identifier splitting and stemming (``text.py``), the
Chinese→English vocabulary, and session follow-up rewriting in the generator.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict

import httpx

from coderag.settings import Settings

log = logging.getLogger(__name__)

MAX_QUERIES = 3
"""Extra queries kept from one rewrite."""

MAX_CHARS = 200
"""Longest extra query kept."""

TIMEOUT_S = 20.0
"""How long a rewrite may take before the question is searched on its own."""

CACHE_SIZE = 512
"""Rewrites remembered per process (questions repeat: the same one from /search and /ask)."""

REWRITE_SHARE = 0.5
"""Weight of an extra query's ranking, as a share of its route's weight."""

PROMPT = (
    "Rewrite the developer's question about a code base into {n} short search queries for a code "
    "search engine: likely function, class or variable names and the key technical terms, in "
    "English. One query per line, no numbering, no explanation.\n\nQuestion: {question}"
)
"""The rewrite instruction."""

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_cache: OrderedDict[tuple[str, str, str], list[str]] = OrderedDict()
_lock = threading.Lock()


def parse(reply: str, question: str) -> list[str]:
    """The extra queries in a model's reply: non-empty lines without bullets or quotes, not the
    question again, at most ``MAX_QUERIES``."""
    out: list[str] = []
    for line in reply.splitlines():
        q = _BULLET.sub("", line).strip().strip("\"'`").strip()
        if q and len(q) <= MAX_CHARS and q.lower() != question.strip().lower() and q not in out:
            out.append(q)
    return out[:MAX_QUERIES]


def llm_queries(
    question: str, settings: Settings, transport: httpx.BaseTransport | None = None
) -> list[str]:
    """Extra search queries for a question, or none when the server fails (logged: search goes
    on with the question alone rather than fail)."""
    key = (settings.llm_base_url, settings.llm_model, question)  # another server, other queries
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    headers = {"Authorization": f"Bearer {settings.llm_api_key}"} if settings.llm_api_key else {}
    body = {
        "model": settings.llm_model or "default",
        "messages": [{"role": "user", "content": PROMPT.format(n=MAX_QUERIES, question=question)}],
        "temperature": 0.0,
        "max_tokens": 96,
    }
    try:
        with httpx.Client(transport=transport, timeout=TIMEOUT_S, headers=headers) as http:
            r = http.post(settings.llm_base_url.rstrip("/") + "/chat/completions", json=body)
            r.raise_for_status()
            reply = r.json()["choices"][0]["message"]["content"] or ""
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        log.warning("query rewrite failed, searching the question alone: %s", exc)
        return []
    queries = parse(reply, question)
    with _lock:
        _cache[key] = queries
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return queries
