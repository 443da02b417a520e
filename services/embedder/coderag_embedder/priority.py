"""Queries before indexing: a gate that holds the next indexing batch while any query encodes.

Queries never wait on the gate; they run on their own encoder instance. The indexer calls
:meth:`QueryGate.before_batch` between batches, so a query waits for nothing and shares the CPU
with at most the one indexing batch already in progress.

In compose the queries arrive at the embedder service's process (``POST /embed``) while its rq
worker indexes in another: with ``REDIS_URL`` set, a query in flight is also counted in Redis,
and the worker's batches wait for that count too (at most ``MAX_HOLD_S`` per batch, so a query
process that died mid-query cannot stall indexing).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from coderag.settings import get_settings

log = logging.getLogger(__name__)

QUERIES_KEY = "coderag:embedder:queries"
"""Redis counter of queries encoding in any embedder process."""

KEY_TTL_S = 30
"""The counter expires this long after the last query began (a crashed process's count goes)."""

MAX_HOLD_S = 10.0
"""Longest one indexing batch waits for other processes' queries."""

POLL_S = 0.01
"""How often a held batch looks at the Redis counter again."""


_clients: dict[str, Any] = {}


def _redis() -> Any | None:
    """A Redis client when jobs go through Redis (compose), else None."""
    url = get_settings().redis_url
    if not url:
        return None
    if url not in _clients:
        from redis import Redis

        # short timeouts: a query must not wait long for a Redis that is down
        _clients[url] = Redis.from_url(url, socket_timeout=0.25, socket_connect_timeout=0.25)
    return _clients[url]


class QueryGate:
    """Counts queries in flight; indexing batches start only when none is (in this process, or
    in another embedder process sharing the Redis of the job queue)."""

    def __init__(self, shared: Callable[[], Any | None] = _redis) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._shared = shared
        self.held = 0
        """How many times an indexing batch waited for queries (observable in tests and bench)."""

    def _count(self, delta: int) -> int:
        """Move (or, with 0, read) the Redis counter; 0 when there is no Redis or it is down:
        the gate must never make a query fail."""
        try:
            conn = self._shared()
            if conn is None:
                return 0
            if not delta:
                return int(conn.get(QUERIES_KEY) or 0)
            with conn.pipeline() as pipe:
                pipe.incrby(QUERIES_KEY, delta)
                pipe.expire(QUERIES_KEY, KEY_TTL_S)
                return int(pipe.execute()[0])
        except Exception as exc:
            log.debug("query gate: Redis unavailable: %s", exc)
            return 0

    @contextmanager
    def query(self) -> Iterator[None]:
        """Mark a query in flight for the duration of the block."""
        with self._cond:
            self._active += 1
        counted = self._count(1) > 0
        try:
            yield
        finally:
            if counted:
                self._count(-1)
            with self._cond:
                self._active -= 1
                if not self._active:
                    self._cond.notify_all()

    def before_batch(self) -> None:
        """Block the indexer until no query is encoding, here or in another process."""
        with self._cond:
            if self._active:
                self.held += 1
            while self._active:
                self._cond.wait()
        deadline = time.monotonic() + MAX_HOLD_S
        if self._count(0) > 0:
            with self._cond:
                self.held += 1
            while self._count(0) > 0 and time.monotonic() < deadline:
                time.sleep(POLL_S)

    @property
    def active(self) -> int:
        """Queries encoding now."""
        with self._cond:
            return self._active


GATE = QueryGate()
"""The process-wide gate shared by every encoder, so a query on one encoder also pauses the
indexing batches of the other (they share the same cores)."""


@contextmanager
def one_core() -> Iterator[None]:
    """Run this thread's torch operators on one core for the block, then as before: a query's
    forward spread over every core spins more than it computes (1.4x the CPU per query on 2
    cores), and concurrent queries already share the cores between them."""
    import torch  # heavy: this module is imported by processes that never encode

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
