"""Indexing stages of a repository, on its row: the keyword, symbol and exact index is published
as soon as the parse ends (the repository is then ``ready``: search works), vectors follow space
by space in batches, and the last job marks the repository ``complete``.

``stages`` is a JSON object ``{space: {"done", "total", "started"}}`` per vector space; a space is
ready when ``done`` reached ``total`` (or the repository is complete).
"""

from __future__ import annotations

from typing import Any

from coderag import routes
from coderag.settings import Settings
from coderag.store import Catalog, stage_rows

VECTOR_ROUTES = routes.VECTOR
"""Routes that read vectors, with the space they read; every other route works once the
keyword stage is published."""


def spaces(settings: Settings) -> list[str]:
    """The vector spaces the embedder fills under these settings."""
    return ["vector", "vector2"] if settings.embed_model_2 else ["vector"]


def publish_keywords(catalog: Catalog, name: str, registration: str, settings: Settings) -> bool:
    """After the parse: the new units searchable by keyword, symbol and exact name (a new
    generation, status ready), vectors owed in every space; False if the repository is gone."""
    files, units = catalog.counts(name)
    owed = {s: {"done": 0, "total": None, "started": None} for s in spaces(settings)}
    return stage_rows.publish_keywords(catalog.db, name, registration, files, units, owed)


def advance(catalog: Catalog, name: str, space: str, done: int, total: int) -> None:
    """Record that ``done`` of the ``total`` vectors a space owes are written."""
    stage_rows.advance(catalog.db, name, space, done, total)


def space_ready(state: dict[str, Any], complete: bool, space: str) -> bool:
    """Whether every vector a space owes is written."""
    if complete:
        return True
    entry = state.get(space)
    if entry is None:  # not owed by this index (a space switched off, or an older row)
        return True
    return entry.get("total") is not None and entry["done"] >= entry["total"]


def route_readiness(
    state: dict[str, Any], complete: bool, routes: list[str]
) -> tuple[list[str], list[str]]:
    """(routes whose data is all in place, routes still waiting for vectors) among ``routes``;
    a waiting vector route already searches the batches written so far."""
    ready, missing = [], []
    for route in routes:
        space = VECTOR_ROUTES.get(route)
        (missing if space and not space_ready(state, complete, space) else ready).append(route)
    return ready, missing
