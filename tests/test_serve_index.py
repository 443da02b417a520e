"""`coderag serve --index DIR` (what `make run` does): the repository is queued before the server
starts, and the start-up heal must not take that chain for one a crash left behind; once the
index is complete the log says so and prints questions about the repository's own code, which
answer (issue 43's second trial: the fixed ones asked about coderag and were refused)."""

from __future__ import annotations

import json
import shlex
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
        path = next(tmp_path.glob("server-*.log"))
        while "'sample' is indexed" not in path.read_text():
            assert time.monotonic() < deadline, path.read_text()[-3000:]
            time.sleep(0.5)
        log = path.read_text()
        examples = [shlex.split(line) for line in log.splitlines() if "curl -s" in line]
        asked = [a for a in examples if a[-1].startswith("{") and "/ask" in " ".join(a)]
        assert len(asked) == 3, log[-3000:]  # English, who/when and Chinese
        for args in asked:
            query = json.loads(args[-1])
            r = httpx.post(f"{base}/ask", json=query, timeout=300)
            answer = r.json()
            assert r.status_code == 200 and not answer["refused"], (query, answer)
            assert answer["citations"], (query, answer)
    assert "coderag is indexing 'sample'" in log
    assert "sample is indexed at " in log and " units; every route is ready" in log, log[-3000:]
    assert "audit log" not in log.split("coderag is indexing")[1], "questions about coderag"
    assert "died" not in log, log[-3000:]
