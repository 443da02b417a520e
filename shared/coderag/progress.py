"""Progress of long jobs: stored on the repository row (throttled) and passed to listeners
such as the CLI's progress bars."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from coderag.store import get_catalog

Listener = Callable[[str, str, int, int], None]
"""Called as listener(repo, stage, done, total)."""

WRITE_EVERY_S = 1.0
"""Least interval between progress writes to the catalog."""

_listeners: list[Listener] = []
_last: dict[str, float] = {}
_lock = threading.Lock()


def listen(listener: Listener) -> Callable[[], None]:
    """Register a listener; returns the function that removes it."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener)


def report(repo: str, stage: str, done: int, total: int) -> None:
    """Record that ``done`` of ``total`` items of a stage are finished."""
    for listener in list(_listeners):
        listener(repo, stage, done, total)
    now = time.monotonic()
    with _lock:
        if done < total and now - _last.get(repo, 0.0) < WRITE_EVERY_S:
            return
        _last[repo] = now

    # Best effort: the repository may just have been deleted.
    with contextlib.suppress(Exception):
        get_catalog().update_repo(repo, progress=f"{stage} {done}/{total}")
