"""The page and the read-only file-range endpoint: only indexed files of a repository, no path
out of it, clear 4xx for every bad range."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag_app.server import create_app
from tests.conftest import wait_ready


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        yield c


def test_page_and_assets_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for src in ("/static/app.js", "/static/i18n.js", "/static/highlight.js", "/static/app.css"):
        assert src in page.text
        r = client.get(src)
        assert r.status_code == 200 and len(r.text) > 500, src
    assert "http://" not in page.text and "https://" not in page.text  # nothing from the network
    assert client.get("/static/..%2Fweb.py").status_code == 404
    assert client.get("/static/index.html").status_code == 404


@pytest.mark.slow
def test_file_range_stays_inside_the_index(client: TestClient, sample_repo: Path) -> None:
    client.post("/repos", json={"name": "sample", "path": str(sample_repo)})
    assert wait_ready(client, "sample")["status"] == "ready"
    r = client.get(
        "/repos/sample/file", params={"path": "src/go/sample.go", "start": 10, "end": 16}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["lines"][1].startswith("func (s *Service) ProcessOrder")
    assert (body["start_line"], body["end_line"], body["language"]) == (10, 16, "go")
    assert body["local_path"] == str(sample_repo.resolve() / "src/go/sample.go")
    whole = client.get("/repos/sample/file", params={"path": "src/go/sample.go"}).json()
    assert whole["start_line"] == 1 and len(whole["lines"]) == whole["total_lines"]

    for path in (
        "secret/keys.py",
        "debug.log",
        "../sample/src/go/sample.go",
        "/etc/passwd",
        "src/go/../go/sample.go",
        "node_modules/lib/index.js",
    ):
        r = client.get("/repos/sample/file", params={"path": path})
        assert r.status_code == 404 and "not an indexed file" in r.json()["detail"], path
    assert client.get("/repos/nope/file", params={"path": "a.py"}).status_code == 404
    bad = {"start": 0}, {"start": 5, "end": 2}, {"start": 10_000}
    for params in bad:
        r = client.get("/repos/sample/file", params={"path": "src/go/sample.go", **params})
        assert r.status_code == 400 and r.json()["detail"], params
    assert client.get("/repos/sample/file").status_code == 422

    # A file swapped for a symlink out of the repository after indexing is not followed.
    outside = sample_repo.parent / "outside.txt"
    outside.write_text("not yours\n")
    target = sample_repo / "src/go/sample.go"
    target.unlink()
    target.symlink_to(outside)
    r = client.get("/repos/sample/file", params={"path": "src/go/sample.go"})
    assert r.status_code == 404 and "no longer a file inside" in r.json()["detail"]
