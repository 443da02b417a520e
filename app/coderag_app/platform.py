"""The platform router shared by every service: /health and the audit export."""

from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from coderag import audit
from coderag.deps import AdminDep, CatalogDep, SettingsDep
from coderag.responses import errors
from coderag.store import get_vectors

router = APIRouter(tags=["platform"])


@router.get("/health")
def health(settings: SettingsDep, catalog: CatalogDep) -> dict:
    """Liveness and each dependency's state."""
    deps: dict[str, str] = {}
    try:
        catalog.db.ping()
        deps[catalog.db.dialect] = "ok"  # "sqlite" or "postgresql"
    except Exception as exc:
        deps[catalog.db.dialect] = f"error: {exc}"
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
    status = "ok" if all(v in ("ok", "in-process") for v in deps.values()) else "degraded"
    return {"status": status, "dependencies": deps}


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
    _user: AdminDep,
    since: str | None = Query(
        None, description="ISO 8601, inclusive", json_schema_extra={"format": "date-time"}
    ),
    until: str | None = Query(
        None, description="ISO 8601, exclusive", json_schema_extra={"format": "date-time"}
    ),
) -> StreamingResponse:
    """The audit log as CSV, optionally between two times (admin)."""
    audit.parse_time(since, "since")
    audit.parse_time(until, "until")
    return StreamingResponse(
        audit.export_csv(catalog, since, until),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="coderag-audit.csv"'},
    )
