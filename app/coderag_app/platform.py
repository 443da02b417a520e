"""The platform router shared by every service: /health and the audit export."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from coderag import audit, auth
from coderag.deps import CatalogDep, PrincipalDep, SettingsDep, current_principal
from coderag.errors import Unauthorized
from coderag.responses import errors
from coderag.settings import Settings
from coderag.store import Catalog, get_vectors

router = APIRouter(tags=["platform"])


@router.get("/health")
def health(settings: SettingsDep, catalog: CatalogDep, request: Request) -> dict:
    """``{"status": "ok"}`` or ``{"status": "down"}`` to anyone; to an admin (everyone when no
    tokens are set) also each dependency's state, with the error a failed one gave, and with
    ``CODERAG_GRANTS`` set, ``grants``: ok or why the file's current version is not in force."""
    try:
        who = request.headers
        admin = current_principal(settings, who.get("authorization"), who.get("x-user")).may(
            "admin"
        )
    except Unauthorized:
        admin = False
    deps = _dependencies(settings, catalog)
    ok = all(v in ("ok", "in-process") for v in deps.values())
    if not admin:  # an error's text names hosts, ports and drivers: not for anonymous callers
        return {"status": "ok" if ok else "down"}
    out = {"status": "ok" if ok else "degraded", "dependencies": deps}
    if settings.grants is not None:
        # a grants file broken since start-up leaves the last good one in force: say so
        out["grants"] = auth.grants_problem(settings.grants) or "ok"
    return out


def _dependencies(settings: Settings, catalog: Catalog) -> dict[str, str]:
    """Each dependency's state: ok, in-process, or what failed."""
    deps: dict[str, str] = {}
    try:
        catalog.ping()
        deps[catalog.dialect] = "ok"  # "sqlite" or "postgresql"
    except Exception as exc:
        cause = exc.__cause__ or exc  # the driver's own words, for the admin
        deps[catalog.dialect] = f"error: {cause}"
    deps["chroma"] = "ok" if get_vectors(settings).heartbeat() else "unreachable"
    if settings.redis_url:
        try:
            from redis import Redis

            Redis.from_url(settings.redis_url, socket_timeout=2).ping()
            deps["redis"] = "ok"
        except Exception as exc:
            deps["redis"] = f"unreachable: {exc}"
    else:
        deps["queue"] = "in-process"
    return deps


@router.get(
    "/audit/export.csv",
    responses={
        200: {"content": {"text/csv": {"schema": {"type": "string"}}}},
        **errors(401, 403, 422),
    },
    response_class=StreamingResponse,
)
def export_audit(
    catalog: CatalogDep,
    caller: PrincipalDep,
    since: str | None = Query(
        None, description="ISO 8601, inclusive", json_schema_extra={"format": "date-time"}
    ),
    until: str | None = Query(
        None, description="ISO 8601, exclusive", json_schema_extra={"format": "date-time"}
    ),
) -> StreamingResponse:
    """The audit log as CSV, optionally between two times: every row for an admin, a reader's
    own rows about the repositories they may read for a reader."""
    audit.parse_time(since, "since")
    audit.parse_time(until, "until")
    catalog.ping()  # a database that is down is a 503 here, not a 200 cut short
    return StreamingResponse(
        audit.export_csv(catalog, since, until, None if caller.may("admin") else caller),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="coderag-audit.csv"'},
    )
