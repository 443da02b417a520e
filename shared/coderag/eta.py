"""How long a repository's indexing has left, from its stages' progress (``coderag.chain``
writes the progress; the catalog reports this with each repository)."""

from __future__ import annotations

import time
from typing import Any


def eta_seconds(state: dict[str, Any], complete: bool) -> float | None:
    """Rough seconds left: the running space's remaining vectors at its rate so far, and the
    spaces not started yet at that same rate (the second encoder is slower: a floor, not a
    promise); None when nothing is running or no rate is known yet."""
    if complete:
        return None
    rate: float | None = None
    left, waiting = 0, 0
    for entry in state.values():
        done, total, started = entry.get("done", 0), entry.get("total"), entry.get("started")
        if total is None:
            waiting += 1
            continue
        left += max(total - done, 0)
        if started and done and done < total:
            rate = done / max(time.time() - started, 1e-3)
    if rate is None:
        return None
    totals = [e["total"] for e in state.values() if e.get("total") is not None]
    per_space = max(totals) if totals else 0
    return round((left + waiting * per_space) / rate, 1)
