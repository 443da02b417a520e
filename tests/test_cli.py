"""The command line through its real process: index, repos, health, reindex (in-process, and queued
for a real ``coderag worker``), search and export-audit on a real git repository, with --json
where a script reads the output (eval: tests/test_eval.py; mcp: tests/test_mcp.py)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest

from tests.conftest import commit_all
from tests.liveserver import ROOT, child_env

pytestmark = pytest.mark.slow


def coderag(data_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``coderag ARGS`` as its own process on ``data_dir`` (``env``: extra variables)."""
    return subprocess.run(
        [sys.executable, "-m", "coderag_app.cli", *args],
        cwd=ROOT,
        env=child_env(data_dir, **env),
        capture_output=True,
        text=True,
        timeout=1800,
    )


def test_cli_commands(sample_repo: Path, data_dir: Path) -> None:
    r = coderag(data_dir, "index", str(sample_repo), "--name", "sample")
    assert r.returncode == 0, r.stderr
    assert "sample: ready" in r.stdout

    r = coderag(data_dir, "repos", "--json")
    assert r.returncode == 0, r.stderr
    (repo,) = json.loads(r.stdout)
    assert repo["name"] == "sample" and repo["status"] == "ready" and repo["units"] > 0
    r = coderag(data_dir, "repos")
    assert r.stdout.startswith("sample ") and "ready" in r.stdout

    r = coderag(data_dir, "health", "sample", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    health = json.loads(r.stdout)
    assert health["units"] == repo["units"] and health["vectors_agree"] is True
    assert health["indexed_commit"] == repo["commit"] == health["head_commit"]

    (sample_repo / "src" / "python" / "more.py").write_text("def more():\n    return 2\n")
    head = commit_all(git.Repo(sample_repo), "more")
    r = coderag(data_dir, "health", "sample")
    assert r.returncode == 1 and "(behind)" in r.stdout and "problem: indexed" in r.stdout

    r = coderag(data_dir, "reindex", "sample", "--json")
    assert r.returncode == 0, r.stderr
    after = json.loads(r.stdout)
    assert after["commit"] == head and after["units"] == repo["units"] + 1
    r = coderag(data_dir, "health", "sample")
    assert r.returncode == 0 and "MISMATCH" not in r.stdout, r.stdout

    r = coderag(data_dir, "reindex", "nope")
    assert r.returncode == 2 and "no repository named 'nope'" in r.stderr
    r = coderag(data_dir, "health", "nope", "--json")
    assert r.returncode == 2 and "nope" in r.stderr


def test_export_audit_since_until(data_dir: Path, tmp_path: Path) -> None:
    from coderag import audit
    from coderag.store import get_catalog

    catalog = get_catalog()
    for query in ("one", "two", "three"):
        audit.record(
            catalog,
            user="ada",
            endpoint="search",
            repo="r",
            query=query,
            files=["a.py"],
            input_tokens=0,
            response_ms=1.0,
            status="ok",
        )
        time.sleep(0.01)  # distinct millisecond timestamps, so the bounds split the rows
    ts = [row["ts"] for row in catalog.db.read("SELECT ts FROM audit ORDER BY id")]
    out = tmp_path / "audit.csv"
    r = coderag(data_dir, "export-audit", "--since", ts[1], "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert [row["query"] for row in csv.DictReader(out.open())] == ["two", "three"]
    r = coderag(data_dir, "export-audit", "--until", ts[1])
    assert [row["query"] for row in csv.DictReader(io.StringIO(r.stdout))] == ["one"]
    r = coderag(data_dir, "export-audit", "--since", "last week")
    assert r.returncode == 2 and "ISO 8601" in r.stderr


def test_reindex_queues_for_a_worker_process(
    sample_repo: Path, data_dir: Path, redis_url: str
) -> None:
    from redis import Redis

    Redis.from_url(redis_url).flushdb()
    r = coderag(data_dir, "index", str(sample_repo), "--name", "sample")
    assert r.returncode == 0, r.stderr
    (sample_repo / "src" / "python" / "queued.py").write_text("def queued():\n    return 3\n")
    head = commit_all(git.Repo(sample_repo), "queued")

    r = coderag(data_dir, "reindex", "sample", "--json", REDIS_URL=redis_url)
    assert r.returncode == 0, r.stderr
    queued = json.loads(r.stdout)
    assert queued["name"] == "sample" and queued["queued"]
    r = coderag(data_dir, "repos", "--json")
    assert json.loads(r.stdout)[0]["commit"] != head  # nothing ran yet: the job waits in Redis

    r = coderag(
        data_dir, "worker", "parser", "embedder", "retriever", "--burst", REDIS_URL=redis_url
    )
    assert r.returncode == 0, r.stderr
    (repo,) = json.loads(coderag(data_dir, "repos", "--json").stdout)
    assert repo["status"] == "ready" and repo["commit"] == head
    r = coderag(data_dir, "search", "queued", "--repo", "sample", "-k", "1")
    assert r.returncode == 0 and "src/python/queued.py:1-2" in r.stdout, r.stdout + r.stderr
