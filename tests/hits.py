"""Hand-made retrieved hits: a ``Hit`` with defaults for the fields a test does not look at."""

from __future__ import annotations

from typing import Any

from coderag.schemas import Hit

DEFAULTS: dict[str, Any] = {
    "file": "f.py",
    "start_line": 1,
    "end_line": 1,
    "symbol": "f",
    "kind": "function",
    "language": "python",
    "score": 0.0,
}
"""What a hand-made hit is unless the test says otherwise."""


def make_hit(**fields: Any) -> Hit:
    """A hit of a one-line Python function ``f`` in ``f.py`` with ``fields`` set."""
    return Hit.model_validate(DEFAULTS | fields)
