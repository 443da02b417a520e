"""Sparse BM25 that can add and remove documents: term -> {slot: term frequency} postings with
document lengths, scored with numpy per query.

bm25s builds a fixed matrix, so every update rebuilt it for the whole repository; here a one-file
update adds and removes that file's documents only. The scores are bm25s' defaults (Lucene idf,
k1 1.5, b 0.75), so the keyword route ranks as it did (tests/test_postings.py compares the two).
"""

from __future__ import annotations

import math
import threading
from collections import Counter

import numpy as np

K1 = 1.5
"""BM25 term-frequency saturation (bm25s' default)."""

B = 0.75
"""BM25 length normalisation (bm25s' default)."""

EMPTY = "\u2205"
"""Stand-in token of an empty document (as the bm25s index was given), so it has length 1."""


class Postings:
    """Documents in slots; a slot freed by ``remove`` is never reused, so an index still being
    read while another is built from the same postings never sees another document's terms."""

    def __init__(self) -> None:
        self.terms: dict[str, dict[int, int]] = {}
        self.lengths = np.zeros(64, dtype=np.float64)
        self.slots = 0
        self.live = 0
        self.total_length = 0
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()

    def add(self, tokens: list[str]) -> int:
        """Index one document; returns its slot."""
        tokens = tokens or [EMPTY]
        with self._lock:
            slot = self.slots
            self.slots += 1
            if slot >= len(self.lengths):
                self.lengths = np.concatenate([self.lengths, np.zeros(len(self.lengths))])
            self.lengths[slot] = len(tokens)
            self.live += 1
            self.total_length += len(tokens)
            for term, tf in Counter(tokens).items():
                self.terms.setdefault(term, {})[slot] = tf
                self._arrays.pop(term, None)
            return slot

    def remove(self, slot: int, tokens: list[str]) -> None:
        """Drop the document in ``slot`` (``tokens`` are the ones it was added with)."""
        tokens = tokens or [EMPTY]
        with self._lock:
            for term in set(tokens):
                posting = self.terms.get(term)
                if posting is not None and posting.pop(slot, None) is not None:
                    self._arrays.pop(term, None)
                    if not posting:
                        del self.terms[term]
            self.live -= 1
            self.total_length -= len(tokens)
            self.lengths[slot] = 0.0

    @property
    def dead(self) -> int:
        """Slots of removed documents (a rebuild reclaims them)."""
        return self.slots - self.live

    def _term(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        arrays = self._arrays.get(term)
        if arrays is None:
            posting = self.terms.get(term)
            if not posting:
                return None
            arrays = (
                np.fromiter(posting.keys(), dtype=np.int64, count=len(posting)),
                np.fromiter(posting.values(), dtype=np.float64, count=len(posting)),
            )
            self._arrays[term] = arrays
        return arrays

    def scores(self, tokens: list[str]) -> np.ndarray:
        """BM25 score of every slot for a query; a repeated query token counts again, as in
        bm25s."""
        # the lock covers the snapshot only, so concurrent queries score in parallel; updates
        # never change a slot in use, and lengths is copied for one that frees a slot meanwhile
        with self._lock:
            if not self.live:
                return np.zeros(self.slots, dtype=np.float64)
            n, average, slots = self.live, self.total_length / self.live, self.slots
            lengths = self.lengths[:slots].copy()
            postings = [a for a in map(self._term, tokens) if a is not None]
        out = np.zeros(slots, dtype=np.float64)
        for ids, tf in postings:
            idf = math.log(1 + (n - len(ids) + 0.5) / (len(ids) + 0.5))
            norm = K1 * ((1 - B) + B * lengths[ids] / average)
            out[ids] += idf * tf / (norm + tf)
        return out
