"""The audit log: one row per user request (a /search, /ask, chat completion, MCP tool call, or a
/retrieve called directly), with the refusal reason and the cited ranges of an answer; exported
as CSV over HTTP and the CLI.

A request served inside another one in this process (/ask's own /retrieve, the /ask an MCP tool
calls) writes no row of its own: it hands its row to the outer request's, which records the
request once. Across processes (compose) the outer service signs its inner request
(``inner_header``) and the inner one writes no row (the generator's /retrieve); an MCP server
calling the API over HTTP names its tool (``TOOL_HEADER``) and the service answering writes the
tool's row."""

from __future__ import annotations

import contextvars
import csv
import hashlib
import hmac
import io
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from coderag import auth
from coderag.auth import Principal
from coderag.errors import InvalidInput
from coderag.store import Catalog, audit_log

if TYPE_CHECKING:
    from coderag.settings import Settings

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


@dataclass(frozen=True)
class AuditRow:
    """One row of the log, as a request writes it (the id and time are the database's)."""

    user: str
    endpoint: str
    repo: str
    query: str
    files: list[str]
    input_tokens: int
    response_ms: float
    status: str
    refusal: str = ""
    cited: list[str] = field(default_factory=list)


@dataclass
class Call:
    """One request being served: who asked, the request it serves (``outer``, when it runs
    inside another one in this process), whether its row is settled, and the row of a request
    it served in turn (``served``). ``discard`` writes nothing (the server's own warm-up, a
    signed inner request whose outer service writes the row); ``endpoint`` names the row as
    the signed outer request asked (``mcp/ask``)."""

    user: str
    outer: Call | None = None
    recorded: bool = False
    served: AuditRow | None = None
    discard: bool = False
    endpoint: str = ""

    def discarded(self) -> bool:
        """Whether this call's rows are thrown away (it runs under a warm-up)."""
        return self.discard or (self.outer is not None and self.outer.discarded())


current_call: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    "coderag_audit_call", default=None
)
"""Set per request by ``audit_http`` (and per MCP tool call); ``record`` settles it, so no request
is logged twice and an inner request's row goes to its outer one."""

observers: list[Callable[[str, str, float], None]] = []
"""Called as observer(endpoint, status, response_ms) for every row written (metrics)."""


INNER_HEADER = "x-coderag-audit"
"""The header a service sends on a request it makes inside a user's request of its own."""

TOOL_HEADER = "x-coderag-mcp-tool"
"""The header an MCP server calling the API over HTTP names its tool by: the request's row is
the tool's (``mcp/<tool>``), whatever its method, and the response says it is written."""

INNER_WINDOW_S = 600
"""How long a signed inner header is honoured (an answer's calls fall well within it)."""


def _inner_key(settings: Settings) -> bytes:
    # derived from what every service of one deployment shares and no reader knows: the API
    # tokens and the Redis and database URLs (compose requires a Redis password). Without tokens
    # every caller is an admin who names itself (X-User), so the log is no stronger than the
    # network either way.
    shared = "\0".join(
        (
            "coderag-audit-v1",
            settings.api_tokens,
            settings.redis_url or "",
            settings.database_url or "",
        )
    )
    return hashlib.sha256(shared.encode("utf-8", "replace")).digest()


def _signature(key: bytes, stamp: str, authorization: str) -> str:
    message = f"{stamp}\n{authorization}".encode("utf-8", "replace")
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def inner_header(settings: Settings, authorization: str) -> str:
    """The ``INNER_HEADER`` value of a request a service makes inside a user's request (sent
    with that user's ``authorization``): the service answering it writes no row, the outer
    request's row records both."""
    stamp = str(int(time.time()))
    return f"{stamp};{_signature(_inner_key(settings), stamp, authorization)}"


def is_inner(settings: Settings, value: str | None, authorization: str) -> bool:
    """Whether a request carries a valid ``INNER_HEADER``: signed by this deployment's services,
    recent, and for the token it is sent with (a forged, stale or borrowed one hides nothing)."""
    if not value:
        return False
    stamp, _, signature = value.partition(";")
    if not stamp.isdigit() or abs(time.time() - int(stamp)) > INNER_WINDOW_S:
        return False
    return hmac.compare_digest(_signature(_inner_key(settings), stamp, authorization), signature)


def text(value: str) -> str:
    """``value`` with any lone surrogate and any NUL replaced by ``?``, so every encoder and
    database (PostgreSQL refuses NUL in text) accepts it."""
    return value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "?")


def span(file: str, start_line: int, end_line: int) -> str:
    """A cited range as the log writes it: ``FILE:start-end``."""
    return f"{file}:{start_line}-{end_line}"


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
    refusal: str = "",
    cited: Sequence[str] = (),
) -> None:
    """Append one audit row (text that is not valid Unicode, a lone surrogate from a JSON
    escape, or a NUL is stored with ``?`` in its place: the row is written whatever the request
    held); inside an outer request the row is handed to it instead (``Call.served``)."""
    call = current_call.get()
    if call is not None and call.endpoint:
        endpoint = call.endpoint
    row = AuditRow(
        user, endpoint, repo, query, list(files), input_tokens, response_ms, status, refusal,
        list(cited),
    )  # fmt: skip
    if call is not None:
        call.recorded = True
        if call.outer is not None:  # the outer request's row records this one
            call.outer.served = row
            return
        if call.discarded():
            return
    write(catalog, row)


def write(catalog: Catalog, row: AuditRow) -> None:
    """Write ``row`` to the log and tell the observers."""
    values = (
        text(row.user),
        text(row.endpoint),
        text(row.repo),
        text(row.query),
        json.dumps([text(f) for f in row.files]),
        row.input_tokens,
        round(row.response_ms, 2),
        text(row.status),
        text(row.refusal),
        json.dumps([text(c) for c in row.cited]),
    )
    catalog.audit_log.insert(values)
    for observe in observers:
        observe(row.endpoint, row.status, row.response_ms)


def grant_key(logged: str) -> str:
    """The grants key of a logged repository (``name`` or ``name@ref``: a ref is read with its
    repository's grant)."""
    return logged.split(auth.REF_SEPARATOR, 1)[0]


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


def export_csv(
    catalog: Catalog, since: str | None, until: str | None, reader: Principal | None = None
) -> Iterator[str]:
    """CSV text of the rows with since <= ts < until, header first: every row, or given a
    ``reader`` (not an admin), that reader's own rows about repositories they may still read
    (a row without a repository, such as a refused token, is theirs to see)."""
    lo, hi = parse_time(since, "since"), parse_time(until, "until")
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(CSV_COLUMNS)
    yield buf.getvalue()
    user = reader.user if reader is not None else None
    for row in catalog.audit_log.rows(CSV_COLUMNS, lo, hi, user):
        if reader is not None and row["repo"] and not reader.may_read(grant_key(row["repo"])):
            continue
        buf.seek(0)
        buf.truncate()
        writer.writerow([safe_cell(row[c]) for c in CSV_COLUMNS])
        yield buf.getvalue()
