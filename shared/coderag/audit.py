"""The audit log: one row per /search, /ask, /retrieve and MCP call, exported as CSV over HTTP and
the CLI."""

from __future__ import annotations

import contextvars
import csv
import io
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from coderag.errors import InvalidInput
from coderag.store import Catalog, audit_log

CSV_COLUMNS = ("id", "ts", *audit_log.COLUMNS)
"""Columns of the export, in order."""

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (CSV injection)."""


def safe_cell(value: object) -> object:
    """``value``, with a leading ``'`` when it is text a spreadsheet would run as a formula, and
    ``?`` for a NUL (a row SQLite stored before NUL was refused), which CSV readers choke on."""
    if isinstance(value, str):
        value = value.replace("\x00", "?")
        if value.startswith(FORMULA_STARTS):
            return "'" + value
    return value


current_call: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "coderag_audit_call", default=None
)
"""Set per HTTP request by ``audit_http``; ``record`` marks it, so no request is logged twice."""

observers: list[Callable[[str, str, float], None]] = []
"""Called as observer(endpoint, status, response_ms) for every row written (metrics)."""


def text(value: str) -> str:
    """``value`` with any lone surrogate and any NUL replaced by ``?``, so every encoder and
    database (PostgreSQL refuses NUL in text) accepts it."""
    return value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "?")


def record(
    catalog: Catalog,
    *,
    user: str,
    endpoint: str,
    repo: str,
    query: str,
    files: list[str],
    input_tokens: int,
    response_ms: float,
    status: str,
) -> None:
    """Append one audit row (text that is not valid Unicode, a lone surrogate from a JSON
    escape, or a NUL is stored with ``?`` in its place: the row is written whatever the request
    held)."""
    row = (
        text(user),
        text(endpoint),
        text(repo),
        text(query),
        json.dumps([text(f) for f in files]),
        input_tokens,
        round(response_ms, 2),
        text(status),
    )
    catalog.audit_log.insert(row)
    if (call := current_call.get()) is not None:
        call["recorded"] = True
    for observe in observers:
        observe(endpoint, status, response_ms)


def parse_time(value: str | None, name: str) -> str | None:
    """Normalise an ISO 8601 bound to the log's UTC format; InvalidInput if unparseable."""
    if value is None:
        return None
    try:
        # RFC 3339 allows a lower-case t and z, and a leap second, which Python does not read
        text = value.upper().replace("Z", "+00:00").replace(":60", ":59")
        dt = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidInput(f"{name}={value!r} is not ISO 8601 (e.g. 2026-11-30T12:00:00Z)") from exc
    if dt.tzinfo is not None:
        try:
            dt = dt.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:  # an offset pushes year 1 or 9999 out of range
            dt = datetime.min if dt.year == 1 else datetime.max
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def export_csv(catalog: Catalog, since: str | None, until: str | None) -> Iterator[str]:
    """CSV text of the rows with since <= ts < until, header first."""
    lo, hi = parse_time(since, "since"), parse_time(until, "until")
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(CSV_COLUMNS)
    yield buf.getvalue()
    for row in catalog.audit_log.rows(CSV_COLUMNS, lo, hi):
        buf.seek(0)
        buf.truncate()
        writer.writerow([safe_cell(row[c]) for c in CSV_COLUMNS])
        yield buf.getvalue()
