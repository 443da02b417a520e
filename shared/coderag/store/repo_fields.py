"""The columns of a repository's row that ``update_repo`` sets, typed, and their encoding (the
store's own business: its callers pass values, never JSON)."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TypedDict

from coderag.schemas import RepoStatus


class RepoFields(TypedDict, total=False):
    """Columns of a repository row to set (a key left out keeps its column; ``error=None``
    clears the error)."""

    status: RepoStatus
    error: str | None
    progress: str | None
    files: int
    dirty: Collection[str]
    """Paths dirty in the work tree at this index, read back by ``dirty_files``."""


def encode(fields: RepoFields) -> dict[str, object]:
    """Column -> value to bind, ``dirty`` as the JSON list of its sorted paths."""
    columns: dict[str, object] = dict(fields)
    if "dirty" in fields:
        dirty = fields["dirty"]
        if isinstance(dirty, str):  # a str is a Collection[str] too: its characters, not paths
            raise TypeError("dirty takes paths, not a string")
        columns["dirty"] = json.dumps(sorted(dirty))
    return columns
