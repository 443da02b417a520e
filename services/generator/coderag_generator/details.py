"""What the index knows about each retrieved unit beyond ``/retrieve``'s hit: its doc comment, the
parser's facts, whether it is test code, who calls it and whether tests call it. Read from the
shared catalog and call graph (``coderag.store``), which the generator already reads for the
citation check."""

from __future__ import annotations

from typing import Any

from coderag.schemas import Unit
from coderag.store.catalog import Catalog
from coderag.store.graph import Graph

MAX_CALLERS = 5
"""Callers named per unit."""


def unit_id(repo: str, hit: dict[str, Any]) -> str:
    """The catalog id of a hit's unit (the same hash the parser gave it)."""
    return Unit(
        repo=repo,
        file=hit["file"],
        start_line=hit["start_line"],
        end_line=hit["end_line"],
        symbol=hit["symbol"],
        kind=hit.get("kind", ""),
        language=hit.get("language", ""),
        text="",
    ).id


def enrich(catalog: Catalog, repo: str, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hits with ``doc``, ``facts``, ``is_test``, ``callers`` (symbols of units that call it)
    and ``tested`` (test code calls it) added; hits the catalog no longer holds pass unchanged."""
    ids = [unit_id(repo, h) for h in hits]
    units = catalog.units_by_id(ids)
    graph = Graph(catalog.db)
    out = []
    for hit, uid in zip(hits, ids, strict=True):
        unit = units.get(uid)
        if unit is None:
            out.append(hit)
            continue
        edges = graph.callers(repo, uid)
        callers = catalog.units_by_id(dict.fromkeys(e.caller for e in edges))
        names = [u.symbol for u in callers.values() if not u.is_test]
        out.append(
            {
                **hit,
                "doc": unit.doc,
                "facts": unit.facts,
                "is_test": unit.is_test,
                "callers": list(dict.fromkeys(names))[:MAX_CALLERS],
                "tested": any(u.is_test for u in callers.values()),
            }
        )
    return out
