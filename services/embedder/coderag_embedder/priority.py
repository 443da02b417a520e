"""Queries before indexing: a gate that holds the next indexing batch while any query encodes.

Queries never wait on the gate; they run on their own encoder instance. The indexer calls
:meth:`QueryGate.before_batch` between batches, so a query waits for nothing and shares the CPU
with at most the one indexing batch already in progress.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class QueryGate:
    """Counts queries in flight; indexing batches start only when none is."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self.held = 0
        """How many times an indexing batch waited for queries (observable in tests and bench)."""

    @contextmanager
    def query(self) -> Iterator[None]:
        """Mark a query in flight for the duration of the block."""
        with self._cond:
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                if not self._active:
                    self._cond.notify_all()

    def before_batch(self) -> None:
        """Block the indexer until no query is encoding."""
        with self._cond:
            if self._active:
                self.held += 1
            while self._active:
                self._cond.wait()

    @property
    def active(self) -> int:
        """Queries encoding now."""
        with self._cond:
            return self._active


GATE = QueryGate()
"""The process-wide gate shared by every encoder, so a query on one encoder also pauses the
indexing batches of the other (they share the same cores)."""
