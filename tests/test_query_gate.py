"""The query gate across processes (compose: queries at the embedder service, indexing in its rq
worker): with a real Redis, a query in flight in another process holds this process's next
indexing batch until it ends; with Redis down, queries and indexing go on as before."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from coderag.settings import get_settings
from coderag_embedder import priority
from coderag_embedder.priority import QUERIES_KEY, QueryGate
from tests.conftest import _free_port
from tests.liveserver import ROOT, child_env
from tests.test_responsive import WAIT_S, finished, in_thread

QUERYING = """
import sys
from coderag_embedder.priority import GATE
with GATE.query():
    print("in flight", flush=True)
    sys.stdin.readline()
print("done", flush=True)
"""
"""A second process that keeps one query in flight until its stdin gets a line."""


def _held(gate: QueryGate, before: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while gate.held == before:
        assert time.monotonic() < deadline, "the batch never reached the gate"
        time.sleep(0.01)


def test_a_query_in_another_process_holds_the_next_indexing_batch(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis import Redis

    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setattr(priority, "MAX_HOLD_S", WAIT_S)  # only the query's end releases it
    get_settings.cache_clear()
    Redis.from_url(redis_url).delete(QUERIES_KEY)
    other = subprocess.Popen(
        [sys.executable, "-c", QUERYING],
        cwd=ROOT,
        env=child_env(tmp_path / "data", REDIS_URL=redis_url),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout.readline().strip() == "in flight"
        assert int(Redis.from_url(redis_url).get(QUERIES_KEY)) == 1
        gate = QueryGate()
        batches: list[int] = []
        indexer = in_thread("indexer", lambda: (gate.before_batch(), batches.append(1)))
        _held(gate, 0)
        assert batches == [] and indexer[0].is_alive()  # waiting for the other process
        other.stdin.write("\n")
        other.stdin.flush()
        assert other.stdout.readline().strip() == "done"
        finished(*indexer)
        assert batches == [1] and int(Redis.from_url(redis_url).get(QUERIES_KEY)) == 0
        # this process's own queries are counted for the other processes too
        with gate.query():
            assert int(Redis.from_url(redis_url).get(QUERIES_KEY)) == 1
        assert int(Redis.from_url(redis_url).get(QUERIES_KEY)) == 0
    finally:
        other.kill()
        other.wait(10)


def test_with_redis_down_queries_and_batches_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{_free_port()}/0")
    get_settings.cache_clear()
    gate = QueryGate()
    with gate.query():
        assert gate.active == 1
    gate.before_batch()
    assert gate.held == 0 and gate.active == 0
