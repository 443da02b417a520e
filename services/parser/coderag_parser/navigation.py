"""The symbol table and call graph over HTTP: what is defined where, who calls it, is it tested."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from coderag.deps import CatalogDep, RepoKeyDep, UserDep, known_query
from coderag.errors import NotFound
from coderag.responses import errors

MAX_SYMBOLS = 500
"""Most rows one /symbols call returns."""

router = APIRouter(tags=["symbols"], dependencies=[Depends(known_query)])


@router.get("/repos/{name}/symbols", responses=errors(400, 404))
def symbols(
    name: RepoKeyDep,
    catalog: CatalogDep,
    _user: UserDep,
    q: str = Query("", max_length=200, description="name prefix (case-insensitive)"),
    kind: str | None = Query(None, description="function, method, class, type, constant, ..."),
    limit: int = Query(50, ge=1, le=MAX_SYMBOLS),
) -> list[dict]:
    """Definitions whose name starts with ``q``, with call-site counts and test coverage."""
    rows = catalog.symbols.starting_with(name, q, kind, limit)
    graph = catalog.graph()
    refs = graph.unit_references(name, [r.unit_id for r in rows if r.unit_id])
    tested = graph.tested(name)
    return [
        {
            "name": r.name,
            "qualified": r.qualified,
            "kind": r.kind,
            "file": r.file,
            "start_line": r.start_line,
            "end_line": r.end_line,
            "references": refs.get(r.unit_id, 0) if r.unit_id else 0,
            "tested": r.unit_id in tested,
        }
        for r in rows
    ]


@router.get("/repos/{name}/calls", responses=errors(400, 404))
def calls(
    name: RepoKeyDep,
    catalog: CatalogDep,
    _user: UserDep,
    symbol: str = Query(..., min_length=1, max_length=300, description="qualified name"),
) -> dict:
    """Callers and callees of the unit defining ``symbol``."""
    unit_id = catalog.symbols.unit_of(name, symbol)
    if unit_id is None:
        raise NotFound(
            f"no symbol {symbol!r} in {name!r}; GET /repos/{name}/symbols?q=... lists them"
        )
    graph = catalog.graph()
    units = catalog.units_by_id(
        [unit_id]
        + [e.caller for e in graph.callers(name, unit_id)]
        + [e.callee for e in graph.callees(name, unit_id)]
    )

    def show(uid: str) -> dict:
        u = units[uid]
        return {
            "symbol": u.symbol,
            "file": u.file,
            "start_line": u.start_line,
            "end_line": u.end_line,
        }

    return {
        "unit": show(unit_id),
        "callers": [show(e.caller) for e in graph.callers(name, unit_id)],
        "callees": [show(e.callee) for e in graph.callees(name, unit_id)],
    }
