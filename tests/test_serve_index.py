"""`coderag serve --index DIR` (what `make run` does): the repository is queued before the server
starts, and the start-up heal must not take that chain for one a crash left behind."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.liveserver import live_server


@pytest.mark.slow
def test_serve_index_runs_one_chain_that_the_startup_heal_leaves_alone(
    tmp_path: Path, sample_repo: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with live_server(data, cli=("--index", str(sample_repo))) as base:
        deadline = time.monotonic() + 600
        while True:
            body = httpx.get(f"{base}/repos/sample", timeout=10).json()
            if body["status"] == "error" or body.get("complete"):
                break
            assert time.monotonic() < deadline, body
            time.sleep(0.5)
        assert body["status"] == "ready" and body["units"] > 0, body
    log = next(tmp_path.glob("server-*.log")).read_text()
    assert "coderag is indexing 'sample'" in log
    assert "died" not in log, log[-3000:]
