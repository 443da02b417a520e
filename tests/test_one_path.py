"""One retrieval path (issue 11): /search, /retrieve, ``coderag search`` and ``coderag ask`` read
the same ``retrieve()``, so the command line answers as /ask does, on a real indexed repository
(tree-sitter, the packaged encoders, embedded Chroma, the extractive backend)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag_app import cli
from coderag_app.server import create_app
from coderag_retriever.retrieval import retrieve
from tests.conftest import wait_ready

pytestmark = pytest.mark.slow

QUESTIONS = (
    "How is an order created?",
    "where are users loaded?",
    "订单是怎么创建的？",
    "how does the service process an order and call validation?",
)

_CITES = re.compile(r"^  cites (\S+):(\d+)-(\d+)$", re.M)
_HIT = re.compile(r"^\d+\.\d{3}  (\S+):(\d+)-(\d+)  ", re.M)


@pytest.fixture
def client(sample_repo: Path) -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        assert c.post("/repos", json={"name": "sample", "path": str(sample_repo)}).status_code
        assert wait_ready(c, "sample")["status"] == "ready"
        yield c


def _ranges(items: list[dict]) -> list[tuple[str, int, int]]:
    return [(c["file"], c["start_line"], c["end_line"]) for c in items]


def _printed(pattern: re.Pattern[str], text: str) -> list[tuple[str, int, int]]:
    return [(f, int(a), int(b)) for f, a, b in pattern.findall(text)]


def test_coderag_ask_cites_what_ask_cites(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    answered = 0
    for question in QUESTIONS:
        body = client.post("/ask", json={"query": question, "repo": "sample"}).json()
        capsys.readouterr()
        assert cli.main(["ask", question, "--repo", "sample"]) == 0
        out = capsys.readouterr().out
        assert _printed(_CITES, out) == _ranges(body["citations"]), (question, body, out)
        assert ("REFUSED: " if body["refused"] else "") + body["answer"] in out, question
        answered += bool(body["citations"])
    assert answered >= 2, "most of these questions are answered with citations"


def test_search_retrieve_and_the_cli_rank_alike(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    for question in QUESTIONS:
        search = client.post("/search", json={"query": question, "repo": "sample", "top_k": 7})
        got = client.post("/retrieve", json={"query": question, "repo": "sample", "top_k": 7})
        found = retrieve("sample", question, 7, get_settings())
        expected = [(h.file, h.start_line, h.end_line) for h in found.hits]
        assert expected and _ranges(search.json()["results"]) == expected
        assert _ranges(got.json()["results"]) == expected
        assert search.json()["below_gate"] == found.below_gate
        assert [h["calls"] for h in got.json()["results"]] == [h.calls for h in found.hits]
        assert all(h["text"] is None for h in search.json()["results"])
        capsys.readouterr()
        assert cli.main(["search", question, "--repo", "sample", "--top-k", "7"]) == 0
        assert _printed(_HIT, capsys.readouterr().out) == expected, question
    calls = [h.calls for q in QUESTIONS for h in retrieve("sample", q, 7, get_settings()).hits]
    assert any(calls), "some hit calls another hit (the generator's chains read them)"
