"""Refs that could never index are refused, and refs that cannot index any more say so (issue 30,
finding 9); workers check a row's path and URL against their own allow-lists (finding 11).

Real git repositories in temp folders, the real app over HTTP and the parser's real job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git
import pytest
from fastapi.testclient import TestClient

from coderag import chain, queue
from coderag.errors import Forbidden, InvalidInput
from coderag.jobs import IndexRepo
from coderag.settings import get_settings
from coderag.store import get_catalog, refs
from coderag.store.refs import ref_key
from coderag_parser import tasks
from tests.conftest import commit_all


def _repo(root: Path) -> git.Repo:
    """A repository on main with a branch feature and a file in a subdirectory."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("def a():\n    return 1\n")
    repo = git.Repo.init(root, initial_branch="main")
    commit_all(repo, "one")
    repo.git.branch("feature")
    return repo


@pytest.fixture
def client() -> Iterator[TestClient]:
    """The all-in-one app (its jobs run when the in-process queue is drained)."""
    from coderag_app.server import create_app

    with TestClient(create_app()) as c:
        yield c


def test_the_checked_out_branch_is_no_ref(client: TestClient, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    _repo(root)
    get_catalog().create_repo("proj", str(root), None, None)  # no branch: main is checked out
    r = client.post("/repos/proj/refs", json={"ref": "main"})
    assert r.status_code == 409, r.text
    assert "'main' is the branch repository 'proj' indexes" in r.json()["detail"]
    assert "checked out" in r.json()["detail"]
    assert get_catalog().list_repos(ref_of="proj") == []


def test_a_subdirectory_of_a_repository_takes_no_refs(client: TestClient, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    _repo(root)
    sub = root / "pkg"
    body = {"name": "sub", "path": str(sub), "refs": ["feature"]}
    r = client.post("/repos", json=body)
    assert r.status_code == 400, r.text
    assert f"register {root}" in r.json()["detail"] and "subdirectory" in r.json()["detail"]
    assert client.get("/repos").json() == []  # nothing half-registered
    get_catalog().create_repo("sub", str(sub), None, None)
    r = client.post("/repos/sub/refs", json={"ref": "feature"})
    assert r.status_code == 400 and f"register {root}" in r.json()["detail"], r.text


def test_refs_waiting_for_a_repository_that_fails_fail_with_it(
    client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "proj"
    _repo(root)
    catalog = get_catalog()
    catalog.create_repo("proj", str(root), None, None)
    refs.add(catalog, "proj", "feature")  # queued: it waits for the repository's index
    # while it waits, searching the ref says which URL to poll, and that URL answers
    r = client.post("/search", json={"query": "a", "repo": "proj", "ref": "feature"})
    assert r.status_code == 409, r.text
    assert "poll GET /repos/proj/refs/feature" in r.json()["detail"], r.text
    assert client.get("/repos/proj/refs/feature").status_code == 200
    # the repository's index fails: its directory is gone before the worker reaches it
    root.rename(tmp_path / "gone")
    with pytest.raises(InvalidInput, match="does not exist"):
        _index_now("proj", monkeypatch)
    assert client.get("/repos/proj").json()["status"] == "error"
    ref = client.get("/repos/proj/refs/feature").json()
    assert ref["status"] == "error", ref
    assert "'proj' failed to index" in ref["error"] and "reindex?ref=feature" in ref["error"]


def test_an_errored_ref_leaves_no_clone(client: TestClient, tmp_path: Path, data_dir: Path) -> None:
    root = tmp_path / "proj"
    repo = _repo(root)
    catalog = get_catalog()
    catalog.create_repo("proj", str(root), None, None)
    catalog.update_repo("proj", None, status="error", error="x")  # its index failed
    r = client.post("/repos/proj/refs", json={"ref": "feature"})
    assert r.status_code == 202, r.text
    repo.git.branch("-D", "feature")  # gone before the worker clones: nothing to check out
    queue.drain()
    ref = client.get("/repos/proj/refs/feature").json()
    assert ref["status"] == "error" and "no branch or tag named 'feature'" in ref["error"], ref
    assert not (data_dir / "repos" / ref_key("proj", "feature")).exists()


def _index_now(name: str, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Run the parser's job for ``name`` here (the next stages are only collected)."""
    queued: list[Any] = []
    monkeypatch.setattr(chain, "enqueue", queued.append)
    tasks.index_repo(IndexRepo(repo=name))
    return queued


def test_a_worker_refuses_a_row_moved_outside_its_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    _repo(allowed / "proj")
    _repo(outside)
    monkeypatch.setenv("CODERAG_REPO_ROOTS", str(allowed))
    monkeypatch.setenv("CODERAG_URL_HOSTS", "git.example.com")
    get_settings.cache_clear()
    catalog = get_catalog()
    catalog.create_repo("proj", str(allowed / "proj"), None, None)
    # someone with the database's password points the row elsewhere
    catalog.db.write(
        lambda c: c.execute("UPDATE repos SET path=:p WHERE name='proj'", {"p": str(outside)})
    )
    with pytest.raises(Forbidden, match="CODERAG_REPO_ROOTS"):
        _index_now("proj", monkeypatch)
    row = catalog.get_repo("proj")
    assert row.status == "error" and row.commit is None, row
    assert "refuses to index 'proj'" in (row.error or "") and str(outside) in (row.error or "")
    assert catalog.file_shas("proj") == {}

    catalog.create_repo("byurl", None, "https://git.example.com/a/b.git", None)
    catalog.db.write(
        lambda c: c.execute(
            "UPDATE repos SET url='https://evil.example.org/x.git' WHERE name='byurl'"
        )
    )
    with pytest.raises(Forbidden, match="CODERAG_URL_HOSTS"):
        _index_now("byurl", monkeypatch)
    assert "evil.example.org" in (catalog.get_repo("byurl").error or "")
    assert not (data_dir / "repos" / "byurl").exists()
