"""The embedder as the retriever sees it: query vectors per vector space, and cross-encoder
scores, from the embedder's own functions in one process or over HTTP (``/embed``) in compose.

The composition root (the all-in-one app, the CLI) installs the in-process embedder; a process
with ``CODERAG_EMBEDDER_URL`` set asks the embedder at that URL instead. The retriever imports
only this module, never the embedder's package.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import httpx
import numpy as np

from coderag.errors import ConfigError, Unavailable, raise_for
from coderag.settings import Settings, get_settings

SPACES_TTL_S = 30.0
"""How long an HTTP client trusts the embedder's list of vector spaces before asking again."""

MAX_TEXTS = 256
"""Most texts one /embed call takes."""

MAX_TEXT_CHARS = 20_000
"""Longest text /embed takes; the encoders read only their first tokens anyway."""

TIMEOUT_S = 60.0
"""Longest an /embed call may take (a query on a busy CPU embedder stays well under it)."""


READER_TEXT_CHARS = 3000
"""Characters of a unit the cross-encoder is sent: more than the 256 tokens it reads."""


def reader_text(file: str, kind: str, symbol: str, doc: str, text: str) -> str:
    """What the cross-encoder reads of a unit: its path, kind and name, its doc when the code
    does not already hold it, then the code from its first line (training reads the same)."""
    head = f"{file} {kind} {symbol}"
    if doc and doc[:40] not in text:
        return f"{head}\n{doc}\n{text}"[:READER_TEXT_CHARS]
    return f"{head}\n{text}"[:READER_TEXT_CHARS]


class QueryEmbedder(Protocol):
    """What the retriever needs of the embedder."""

    def spaces(self) -> list[str]:
        """The vector spaces an encoder feeds (``vector``, and ``vector2`` with a second one)."""
        ...

    def embed_queries(self, space: str, texts: list[str]) -> np.ndarray | None:
        """L2-normalised query vectors, one row per text; None when no encoder feeds ``space``.
        Never waits for an indexing batch."""
        ...

    def rerank(self, query: str, texts: list[str], model: str) -> list[float]:
        """A cross-encoder's score of each (query, text) pair."""
        ...


@dataclass(frozen=True)
class LocalEmbedder:
    """The embedder's own functions, called in this process."""

    list_spaces: Callable[[], list[str]]
    encode: Callable[[str, list[str]], np.ndarray | None]
    score: Callable[[str, str, list[str]], list[float]]

    def spaces(self) -> list[str]:
        """The vector spaces an encoder feeds."""
        return self.list_spaces()

    def embed_queries(self, space: str, texts: list[str]) -> np.ndarray | None:
        """Query vectors from the in-process encoder of ``space``."""
        return self.encode(space, texts)

    def rerank(self, query: str, texts: list[str], model: str) -> list[float]:
        """Scores from the cross-encoder in the local directory ``model``."""
        return self.score(model, query, texts)


class _SpaceCache:
    """The embedder's spaces as last read, shared by the clients of one URL."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spaces: list[str] | None = None
        self.read_at = 0.0


@dataclass(frozen=True)
class HttpEmbedder:
    """The embedder's ``/embed`` routes over HTTP; ``transport`` replaces the network in tests."""

    http: httpx.Client
    headers: dict[str, str]
    cache: _SpaceCache

    @classmethod
    def connect(cls, base_url: str, transport: httpx.BaseTransport | None = None) -> HttpEmbedder:
        """A client with its own connection pool."""
        http = httpx.Client(base_url=base_url, transport=transport, timeout=TIMEOUT_S)
        return cls(http, {}, _SpaceCache())

    def for_caller(self, authorization: str | None) -> HttpEmbedder:
        """The same client sending a caller's ``Authorization`` header along."""
        return replace(self, headers={"authorization": authorization} if authorization else {})

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            resp = self.http.request(method, path, json=body, headers=self.headers)
        except httpx.HTTPError as exc:
            raise Unavailable(f"embedder unreachable at {self.http.base_url}: {exc}") from exc
        raise_for(resp, "embedder")
        answer: dict[str, Any] = resp.json()
        return answer

    def spaces(self) -> list[str]:
        """The embedder's vector spaces (``GET /embed/spaces``), re-read every SPACES_TTL_S."""
        with self.cache.lock:
            if (
                self.cache.spaces is not None
                and time.monotonic() - self.cache.read_at < SPACES_TTL_S
            ):
                return list(self.cache.spaces)
        names = [s["name"] for s in self._call("GET", "/embed/spaces")["spaces"]]
        with self.cache.lock:
            self.cache.spaces, self.cache.read_at = names, time.monotonic()
        return list(names)

    def embed_queries(self, space: str, texts: list[str]) -> np.ndarray | None:
        """Query vectors (``POST /embed`` with ``kind: query``)."""
        if space not in self.spaces():
            return None
        body = self._call("POST", "/embed", {"texts": texts, "space": space, "kind": "query"})
        return np.asarray(body["vectors"], dtype=np.float32).reshape(len(texts), body["dim"])

    def rerank(self, query: str, texts: list[str], model: str) -> list[float]:
        """Scores from the embedder's cross-encoder (``POST /embed/rerank``); the embedder's own
        ``CODERAG_RERANK_MODEL`` must name the same model."""
        # the cross-encoder reads 512 tokens of each pair: a longer unit loses nothing it reads
        clipped = [t[:MAX_TEXT_CHARS] for t in texts]
        body = self._call("POST", "/embed/rerank", {"query": query, "texts": clipped})
        if body["model"] != model:
            raise Unavailable(
                f"the embedder reranks with {body['model']!r}, this process asks for {model!r}: "
                "set CODERAG_RERANK_MODEL alike on both"
            )
        return [float(s) for s in body["scores"]]


_lock = threading.Lock()
_local: LocalEmbedder | None = None
_http: dict[str, HttpEmbedder] = {}


def use_local(embedder: LocalEmbedder | None) -> None:
    """Install (or, with None, remove) the in-process embedder; the composition root calls it."""
    global _local
    with _lock:
        _local = embedder


def query_embedder(
    settings: Settings | None = None, authorization: str | None = None
) -> QueryEmbedder:
    """The embedder to ask: over HTTP at ``CODERAG_EMBEDDER_URL`` when set (with the caller's
    authorization), else the in-process one."""
    s = settings or get_settings()
    if s.embedder_url:
        with _lock:
            client = _http.get(s.embedder_url)
            if client is None:
                client = _http[s.embedder_url] = HttpEmbedder.connect(s.embedder_url)
        return client.for_caller(authorization)
    if _local is None:
        raise ConfigError(
            "no embedder for queries: set CODERAG_EMBEDDER_URL to the embedder service, or run "
            "the embedder in this process (coderag serve with all services)"
        )
    return _local
