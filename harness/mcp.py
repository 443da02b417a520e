"""One MCP tool call over streamable HTTP, for the tests and the bench scripts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent


def mcp_tool(base: str, headers: Mapping[str, str], tool: str, arguments: dict[str, Any]) -> Any:
    """Call one MCP tool at ``base``/mcp as the caller of ``headers``; its structured result
    (AssertionError on a tool error)."""

    async def call() -> Any:
        async with (
            httpx2.AsyncClient(headers=dict(headers), timeout=300) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c,
        ):
            result = await c.call_tool(tool, arguments)
        assert not result.is_error, result.content
        if result.structured_content is not None:
            return result.structured_content
        first = result.content[0]
        assert isinstance(first, TextContent), first
        return json.loads(first.text)

    return anyio.run(call)
