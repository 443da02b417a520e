"""Ranking is CPU work: a process ranks at most ``CODERAG_SEARCH_SLOTS`` questions at once (two
per CPU by default), the others waiting their turn instead of sharing the cores forty ways."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from coderag.settings import Settings
from coderag.store import get_catalog
from coderag_retriever import retrieval


def test_at_most_the_slots_rank_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    get_catalog().create_repo("slots", str(tmp_path), None, None)
    running, most = 0, 0
    lock = threading.Lock()

    def rank(*_: Any) -> list:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return []

    monkeypatch.setattr(retrieval, "rank", rank)
    settings = Settings(search_slots=2)
    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(lambda _: retrieval.retrieve("slots", "q", 5, settings), range(8)))
    assert len(done) == 8 and most == 2


def test_the_default_is_two_per_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 3)
    assert Settings().slots() == 6 and Settings(search_slots=1).slots() == 1
