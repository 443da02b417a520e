"""The MCP server for coding agents: tools over the HTTP contract, served as streamable HTTP at
/mcp on the same server and over stdio by ``coderag mcp``.

Each tool calls the contract's endpoints through an httpx client: in-process (ASGI transport into
the app) or over HTTP to ``CODERAG_API_URL`` (compose, or a remote server). So a tool sees exactly
what the HTTP API grants that caller: the same tokens and repository checks. Each tool call is one
``mcp/<tool>`` audit row: an endpoint it calls in this process hands its row over (the answer's
refusal reason, cited ranges and tokens) instead of writing one; over HTTP (compose, or
``coderag mcp --url``) the service answering writes the ``mcp/<tool>`` row, asked by a header
naming the tool, whatever endpoint the tool calls."""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from coderag import audit
from coderag.deps import current_principal
from coderag.errors import Unauthorized
from coderag.schemas import check_repo_name
from coderag.settings import get_settings
from coderag.store import get_catalog

ClientFactory = Callable[[], httpx.AsyncClient]
"""Makes the client a tool call uses; its base URL is the coderag API."""

INSTRUCTIONS = (
    "coderag answers questions about indexed code bases with checked FILE:start-end citations. "
    "list_repos names the repositories; search_code finds functions and classes; read_range "
    "reads lines of an indexed file; ask answers in English or Chinese, citing its sources."
)
"""What the server tells an agent about itself."""


STDIO_IDENTITY: dict[str, str] = {}
"""Headers a stdio server forwards (``coderag mcp --token/--user`` sets them)."""


def api_path(*segments: str) -> str:
    """An API path from its segments, each percent-escaped whole: no ``/``, ``..``, ``?`` or
    ``#`` inside a value can change which endpoint is called."""
    return "".join("/" + quote(s, safe="") for s in segments)


def repo_path(repo: str, *rest: str) -> str:
    """``/repos/{repo}/...`` for a valid repository name; ValueError saying what names are."""
    return api_path("repos", check_repo_name(repo), *rest)


def _range(hit: dict[str, Any]) -> str:
    return f"{hit['file']}:{hit['start_line']}-{hit['end_line']}"


class Tools:
    """Makes the tools' API calls and writes their audit rows: in this process
    (``local_audit``), or, over HTTP (``remote``: compose, ``coderag mcp --url``), by the
    service that answers, which a header naming the tool asks to write the ``mcp/<tool>`` row
    (a row is written here only when no service answered)."""

    def __init__(self, client: ClientFactory, local_audit: bool, remote: bool = False) -> None:
        self.client = client
        self.local_audit = local_audit
        self.remote = remote

    def refused(
        self, ctx: Context | None, tool: str, arguments: dict[str, Any], reason: str
    ) -> None:
        """The audit row of a call refused before any request (an argument the tool does not
        take), written where this server writes its rows (in this process)."""
        if not self.local_audit:
            return  # over HTTP the services write the rows, and this call reached none
        _, user = identity(ctx)
        audit.record(
            get_catalog(),
            user=user,
            endpoint=f"mcp/{tool}",
            repo=_arg(arguments, "repo")[:64],
            query=_arg(arguments, "query") or reason,
            files=[],
            input_tokens=0,
            response_ms=0.0,
            status="error 400",
        )

    async def call(
        self,
        ctx: Context | None,
        tool: str,
        repo: str,
        query: str,
        method: str,
        path: str | Callable[[], str],
        **kw: Any,
    ) -> Any:
        """One API request on the caller's behalf, audited as ``mcp/<tool>``; errors → ToolError.
        ``path`` may be a function building it from the tool's arguments (``repo_path``): its
        ValueError is the caller's mistake, answered and audited as a 400."""
        headers, user = identity(ctx)
        start = time.perf_counter()
        status, files = "ok", []
        call = audit.Call(user, outer=audit.current_call.get())
        # an audited endpoint called in this process sees this call as its outer request
        token = audit.current_call.set(call) if self.local_audit else None
        try:
            if callable(path):
                try:
                    path = path()
                except ValueError as exc:
                    status = "error 400"
                    raise ToolError(f"400: repo {repo!r}: {exc}") from exc
            if self.remote:
                headers = headers | {audit.TOOL_HEADER: tool}
            async with self.client() as http:
                r = await http.request(method, path, headers=headers, **kw)
            if r.headers.get(audit.TOOL_HEADER) == "written":
                call.recorded = True  # the service that answered writes this call's row
            if r.status_code >= 400:
                status = f"error {r.status_code}"
                detail = r.json().get("detail", r.text) if r.content else r.reason_phrase
                raise ToolError(f"{r.status_code}: {detail}")
            body = r.json() if r.content else None
            files = _files(body)
            if isinstance(body, dict) and body.get("refused"):
                status = "refused"
            return body
        except httpx.HTTPError as exc:
            status = "error unreachable"
            raise ToolError(f"coderag API unreachable: {exc}") from exc
        finally:
            if token is not None:
                audit.current_call.reset(token)
            if token is not None and not call.recorded:
                inner = call.served
                audit.record(
                    get_catalog(),
                    user=user,
                    endpoint=f"mcp/{tool}",
                    repo=repo,
                    query=query,
                    files=files or (inner.files if inner else []),
                    input_tokens=inner.input_tokens if inner else 0,
                    response_ms=(time.perf_counter() - start) * 1000,
                    status=status,
                    refusal=inner.refusal if inner else "",
                    cited=inner.cited if inner else [],
                )


def _arg(arguments: dict[str, Any], key: str) -> str:
    value = arguments.get(key)
    return value if isinstance(value, str) else ""


def _ref(ref: str | None) -> dict[str, str]:
    """The ``ref`` query parameter, when a ref is asked for."""
    return {"ref": ref} if ref else {}


def _files(body: Any) -> list[str]:
    if not isinstance(body, dict):
        return []
    items = body.get("results") or body.get("citations") or []
    return list(dict.fromkeys(i["file"] for i in items if isinstance(i, dict) and "file" in i))


def identity(ctx: Context | None) -> tuple[dict[str, str], str]:
    """Headers to forward (bearer token, X-User) and the user name for the MCP audit row: over
    HTTP the caller's own, over stdio those given to ``coderag mcp``."""
    incoming = (ctx.headers if ctx is not None else None) or STDIO_IDENTITY
    headers = {k: v for k in ("authorization", "x-user") if (v := incoming.get(k))}
    try:
        user = current_principal(
            get_settings(), headers.get("authorization"), headers.get("x-user")
        ).user
    except Unauthorized:
        user = "unauthenticated"
    return headers, user


class StrictServer(MCPServer):
    """The SDK's server, refusing an argument a tool does not take: the SDK drops it, and the
    tool answers as if it were not asked (issue 43's third trial passed ``query`` to ``symbols``
    and got the first 50 symbols). ``refused`` writes such a call's audit row."""

    refused: Callable[[Context | None, str, dict[str, Any], str], None] | None = None

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> Any:
        """The tool's answer, or a ToolError naming the arguments it does not take."""
        tool = next((t for t in await self.list_tools() if t.name == name), None)
        if tool is not None:
            takes = sorted((tool.input_schema or {}).get("properties", {}))
            unknown = sorted(set(arguments) - set(takes))
            if unknown:
                said = (
                    f"{name} takes no argument {', '.join(map(repr, unknown))}; "
                    f"it takes {', '.join(takes) or 'none'}"
                )
                if self.refused is not None:
                    self.refused(context, name, arguments, said)
                raise ToolError(f"400: {said}")
        return await super().call_tool(name, arguments, context)


def build_server(
    client: ClientFactory, local_audit: bool = True, remote: bool = False
) -> MCPServer:
    """The MCP server with coderag's tools (``Tools`` says how each call is audited)."""
    tools = Tools(client, local_audit, remote)
    mcp = StrictServer("coderag", instructions=INSTRUCTIONS, version="0.1.0")
    mcp.refused = tools.refused

    @mcp.tool()
    async def list_repos(ctx: Context) -> list[dict[str, Any]]:
        """Indexed repositories with status, files, units, last commit and the other branches
        and tags indexed (search_code and ask take one as ``ref``)."""
        repos = await tools.call(ctx, "list_repos", "", "", "GET", "/repos")
        keys = ("name", "status", "files", "units", "skipped", "commit", "indexed_at", "progress")
        return [
            {**{k: r.get(k) for k in keys}, "refs": [x["ref"] for x in r.get("refs") or []]}
            for r in repos
        ]

    @mcp.tool()
    async def search_code(
        query: str, repo: str, ctx: Context, top_k: int = 10, ref: str | None = None
    ) -> list[dict[str, Any]]:
        """Best functions, methods and classes for a query (English or Chinese), each naming its
        FILE:start-end range, symbol, kind and language; ``ref`` searches another indexed branch
        or tag."""
        body = await tools.call(
            ctx,
            "search_code",
            repo,
            query,
            "POST",
            "/search",
            json={"query": query, "repo": repo, "top_k": top_k, "ref": ref},
        )
        keys = (
            "file",
            "start_line",
            "end_line",
            "symbol",
            "kind",
            "language",
            "score",
            "signature",
            "last_commit",
            "last_author",
        )
        return [{"range": _range(h), **{k: h.get(k) for k in keys}} for h in body["results"]]

    @mcp.tool()
    async def ask(
        query: str, repo: str, ctx: Context, session_id: str | None = None, ref: str | None = None
    ) -> dict[str, Any]:
        """Answer a question about the repository with checked FILE:start-end citations, or refuse
        when the indexed code does not contain it; reuse session_id for follow-up questions;
        ``ref`` asks about another indexed branch or tag. ``freshness`` names the commit the
        index was built from and how many commits HEAD has gained since (reindex when behind)."""
        payload = {"query": query, "repo": repo, "session_id": session_id, "ref": ref}
        body = await tools.call(ctx, "ask", repo, query, "POST", "/ask", json=payload)
        keys = ("answer", "citations", "refused", "reason", "session_id", "took_ms", "freshness")
        return {k: body.get(k) for k in keys}

    @mcp.tool()
    async def read_range(
        repo: str,
        file: str,
        ctx: Context,
        start_line: int = 1,
        end_line: int | None = None,
        ref: str | None = None,
    ) -> dict[str, Any]:
        """Lines start_line-end_line of an indexed file (as search_code names it), numbered;
        ``ref`` reads it at another indexed branch or tag."""
        params: dict[str, Any] = {"path": file, "start": start_line, **_ref(ref)}
        if end_line is not None:
            params["end"] = end_line
        body = await tools.call(
            ctx,
            "read_range",
            repo,
            file,
            "GET",
            lambda: repo_path(repo, "file"),
            params=params,
        )
        numbered = "\n".join(
            f"{n:>5}  {line}" for n, line in enumerate(body["lines"], body["start_line"])
        )
        return {
            "range": _range({**body, "file": file}),
            "total_lines": body["total_lines"],
            "language": body["language"],
            "text": numbered,
        }

    @mcp.tool()
    async def symbols(
        repo: str,
        ctx: Context,
        prefix: str = "",
        kind: str | None = None,
        limit: int = 50,
        ref: str | None = None,
    ) -> list[dict[str, Any]]:
        """Definitions whose name starts with prefix, with FILE:start-end, references, tested
        (``ref``: at another indexed branch or tag)."""
        params: dict[str, Any] = {"q": prefix, "limit": limit, **_ref(ref)}
        if kind:
            params["kind"] = kind
        rows = await tools.call(
            ctx, "symbols", repo, prefix, "GET", lambda: repo_path(repo, "symbols"), params=params
        )
        return [{"range": _range(r), **r} for r in rows]

    async def graph(
        ctx: Context, tool: str, repo: str, symbol: str, side: str, ref: str | None
    ) -> dict[str, Any]:
        params = {"symbol": symbol, **_ref(ref)}
        body = await tools.call(
            ctx, tool, repo, symbol, "GET", lambda: repo_path(repo, "calls"), params=params
        )
        return {
            "unit": {"range": _range(body["unit"]), **body["unit"]},
            side: [{"range": _range(u), **u} for u in body[side]],
        }

    @mcp.tool()
    async def callers(
        repo: str, symbol: str, ctx: Context, ref: str | None = None
    ) -> dict[str, Any]:
        """Units that call the qualified symbol (e.g. Service.process), with FILE:start-end
        (``ref``: at another indexed branch or tag)."""
        return await graph(ctx, "callers", repo, symbol, "callers", ref)

    @mcp.tool()
    async def callees(
        repo: str, symbol: str, ctx: Context, ref: str | None = None
    ) -> dict[str, Any]:
        """Units the qualified symbol calls, with FILE:start-end (``ref``: at another indexed
        branch or tag)."""
        return await graph(ctx, "callees", repo, symbol, "callees", ref)

    return mcp


def stdio_user() -> str:
    """The OS user, named in audit rows of a stdio server that was given no --user."""
    try:
        return "stdio-" + getpass.getuser()
    except (KeyError, OSError):
        return "stdio"
