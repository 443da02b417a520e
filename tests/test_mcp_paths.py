"""MCP tools never let an argument choose the endpoint they call: hostile repository names
(``small/../../audit/export.csv?x=`` once made read_range fetch the audit export with the
caller's admin token) are refused as the 400 of a bad name, through the real /mcp endpoint of a
real uvicorn server and the SDK's own client; audited as such; the export is never requested."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import anyio
import git
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from coderag_app.mcp_server import api_path, repo_path
from tests.conftest import commit_all
from tests.liveserver import live_server, wait_complete

pytestmark = pytest.mark.slow

TOKEN = "mcp-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

HOSTILE = (
    "small/../../audit/export.csv?x=",
    "small/../../audit/export.csv#",
    "../audit/export.csv",
    "small%2F..%2F..%2Faudit%2Fexport.csv",
    "small?x=",
    "small/file",
    "..",
)


def test_path_segments_are_escaped_whole() -> None:
    assert api_path("repos", "a/../b?c#d", "file") == "/repos/a%2F..%2Fb%3Fc%23d/file"
    assert repo_path("small", "calls") == "/repos/small/calls"
    for name in HOSTILE:
        with pytest.raises(ValueError, match="name must be"):
            repo_path(name, "file")


def test_hostile_repo_names_reach_no_other_endpoint(tmp_path: Path, data_dir: Path) -> None:
    repo = tmp_path / "small"
    repo.mkdir()
    (repo / "calc.py").write_text(
        "def add(a: int, b: int) -> int:\n    return a + b\n\n\n"
        "def twice(a: int) -> int:\n    return add(a, a)\n"
    )
    commit_all(git.Repo.init(repo), "init")
    env = {"CODERAG_API_TOKENS": f"ada:{TOKEN}:admin", "CODERAG_EMBED_MODEL_2": ""}
    with live_server(data_dir, **env) as base:
        with httpx.Client(base_url=base, headers=AUTH, timeout=60) as http:
            assert http.post("/repos", json={"name": "small", "path": str(repo)}).status_code == 202
            assert wait_complete(http, "small")["status"] == "ready"
            before = _rows(http.get("/audit/export.csv").text)

        refused: list[str] = []

        async def calls() -> None:
            async with (
                httpx2.AsyncClient(headers=AUTH, timeout=120) as client,
                Client(streamable_http_client(f"{base}/mcp", http_client=client)) as mcp,
            ):
                ok = await mcp.call_tool("read_range", {"repo": "small", "file": "calc.py"})
                assert not ok.is_error, ok.content
                # an argument the tool does not take is an error naming it, not dropped (issue
                # 43's third trial: symbols with query= listed the first 50 symbols)
                wrong = await mcp.call_tool("symbols", {"repo": "small", "query": "add"})
                said = " ".join(getattr(b, "text", "") for b in wrong.content)
                assert wrong.is_error and "'query'" in said and "prefix" in said, said
                for name in HOSTILE:
                    for tool, args in (
                        ("read_range", {"repo": name, "file": "calc.py"}),
                        ("symbols", {"repo": name, "prefix": "a"}),
                        ("callers", {"repo": name, "symbol": "add"}),
                        ("callees", {"repo": name, "symbol": "twice"}),
                    ):
                        result = await mcp.call_tool(tool, args)
                        text = result.content[0].text
                        assert result.is_error, (tool, name, text)
                        assert ": 400: repo " in text and "name must be" in text, text
                        assert "retrieved_files" not in text  # no CSV header came back
                        refused.append(tool)

        anyio.run(calls)
        with httpx.Client(base_url=base, headers=AUTH, timeout=60) as http:
            rows = _rows(http.get("/audit/export.csv").text)[len(before) :]
            metrics = http.get("/metrics").text
    mcp_rows = [r for r in rows if r["endpoint"].startswith("mcp/")]
    assert [r["status"] for r in mcp_rows] == ["ok"] + ["error 400"] * (1 + len(refused))
    assert [r["endpoint"] for r in mcp_rows[1:]] == [f"mcp/{t}" for t in ["symbols", *refused]]
    assert mcp_rows[1]["repo"] == "small" and mcp_rows[1]["user"] == "ada", mcp_rows[1]
    # every request the app answered, the tools' in-process ones included, by route
    exports = sum(
        s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.name == "http_requests_total" and s.labels.get("handler") == "/audit/export.csv"
    )
    assert exports == 2  # the test's own two reads, none from a tool


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))
