"""Branches and tags on a real git repository: a ref is forked from the repository's complete
index, reads only the files that differ, equals a full index of its own tree, is searched with
``ref``, and leaves nothing behind when deleted."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import git
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag.store import get_catalog, get_vectors, reset_stores
from coderag.store.refs import ref_key
from coderag.store.vectors import collection_name
from coderag_embedder.encoder import get_encoders
from coderag_parser import tasks
from harness.snapshot import snapshot
from tests.conftest import FIXTURES, commit_all, wait_ready
from tests.test_webhooks import SECRET, github_push, make_remote, push_payload

FEATURE_ONLY = '''
def reconcile_ledger_entries(entries):
    """Match every debit with its credit before the books close."""
    return [e for e in entries if e.get("matched")]
'''


def _repo(root: Path) -> git.Repo:
    """main: four languages' fixtures; feature: one file changed, one added, one deleted; tag
    v1: main's commit."""
    for d in ("python", "go", "java", "typescript"):
        src = next(p for p in (FIXTURES / d).iterdir() if p.name != "expected.json")
        (root / d).mkdir(parents=True)
        shutil.copy(src, root / d / src.name)
    repo = git.Repo.init(root, initial_branch="main")
    commit_all(repo, "main")
    repo.create_tag("v1")
    repo.git.checkout("-b", "feature")
    (root / "python" / "ledger.py").write_text(FEATURE_ONLY)
    go = next((root / "go").iterdir())
    go.write_text(go.read_text() + "\nfunc FeatureFlagEnabled() bool { return true }\n")
    shutil.rmtree(root / "java")
    commit_all(repo, "feature")
    repo.git.checkout("main")
    return repo


def _ref_state(client: TestClient, name: str, ref: str, timeout: float = 120) -> dict:
    """Poll one ref until complete or failed."""
    wait_ready(client, name, timeout)
    body = client.get(f"/repos/{name}/refs/{ref}").json()
    assert body["status"] == "ready" and body["complete"], body
    return body


def _parsed_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths every parse reads from now on (the parser's work)."""
    seen: list[str] = []
    real = tasks.parse_all

    def counting(jobs: list, workers: int, name: str) -> list:
        seen.extend(j[2] for j in jobs)
        return real(jobs, workers, name)

    monkeypatch.setattr(tasks, "parse_all", counting)
    return seen


def _encoded_texts() -> int:
    """Texts ever encoded (the embedding cache holds each once per encoder)."""
    return get_catalog().db.read("SELECT COUNT(*) FROM embed_cache")[0][0]


def _search(client: TestClient, query: str, ref: str | None = None) -> list[str]:
    body = {"query": query, "repo": "proj", "top_k": 5, **({"ref": ref} if ref else {})}
    resp = client.post("/search", json=body)
    assert resp.status_code == 200, resp.text
    return [h["symbol"] for h in resp.json()["results"]]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The catalog on each database in turn (a fresh PostgreSQL database on the session's
    server)."""
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres").create("refs")
        monkeypatch.setenv("CODERAG_DATABASE_URL", url)
        get_settings.cache_clear()
        reset_stores()
    return request.param


@pytest.mark.slow
def test_a_ref_reads_only_what_differs_and_equals_a_full_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    from coderag_app.server import create_app

    root = tmp_path / "proj"
    _repo(root)
    with TestClient(create_app()) as client:
        assert client.post("/repos", json={"name": "proj", "path": str(root)}).status_code == 202
        assert wait_ready(client, "proj")["status"] == "ready"
        parsed, encoded_before = _parsed_paths(monkeypatch), _encoded_texts()

        resp = client.post("/repos/proj/refs", json={"ref": "feature"})
        assert resp.status_code == 202, resp.text
        state = _ref_state(client, "proj", "feature")
        feature = git.Repo(root).commit("feature").hexsha
        assert state["commit"] == feature

        # the fork read the changed and the added file only (the deleted one is dropped)
        assert sorted(parsed) == sorted(
            ["python/ledger.py", f"go/{next((root / 'go').iterdir()).name}"]
        )
        # and encoded only the units those files changed, once per encoder
        key = ref_key("proj", "feature")
        new_units = {u.content_hash for u in get_catalog().units(key) if u.file in set(parsed)} - {
            u.content_hash for u in get_catalog().units("proj")
        }
        assert 0 < _encoded_texts() - encoded_before <= len(new_units) * len(get_encoders())

        # the same rows and vectors as a full index of the feature branch's tree
        full_root = tmp_path / "full"
        git.Repo(root).clone(full_root, branch="feature")
        assert (
            client.post("/repos", json={"name": "full", "path": str(full_root)}).status_code == 202
        )
        wait_ready(client, "full")
        assert snapshot(key) == snapshot("full")

        # searched with ref; the repository's own branch without it
        assert "reconcile_ledger_entries" in _search(client, "reconcile ledger entries", "feature")
        assert "reconcile_ledger_entries" not in _search(client, "reconcile ledger entries")
        ask = client.post(
            "/ask",
            json={
                "query": "where are ledger entries reconciled?",
                "repo": "proj",
                "ref": "feature",
            },
        )
        assert ask.status_code == 200, ask.text
        assert not ask.json()["refused"]
        assert {c["file"] for c in ask.json()["citations"]} == {"python/ledger.py"}
        page = client.get("/repos/proj/file", params={"path": "python/ledger.py", "ref": "feature"})
        assert page.status_code == 200 and "reconcile_ledger_entries" in "".join(
            page.json()["lines"]
        )
        assert (
            client.get("/repos/proj/file", params={"path": "python/ledger.py"}).status_code == 404
        )

        # listed under its repository, never as one
        listed = client.get("/repos").json()
        assert sorted(r["name"] for r in listed) == ["full", "proj"]
        assert [r["ref"] for r in client.get("/repos/proj").json()["refs"]] == ["feature"]

        # deleting the ref leaves nothing of it behind; the repository stays searchable
        prefixes = tuple(collection_name(key, space, "") for space in get_encoders())
        names = [c.name for c in get_vectors().client.list_collections()]
        assert len([n for n in names if n.startswith(prefixes)]) == len(prefixes), names
        assert client.delete("/repos/proj/refs/feature").status_code == 204
        db = get_catalog().db
        schema = sa.inspect(db.engine)
        for table in set(schema.get_table_names()) - {"audit"}:  # the log keeps what was asked
            cols = {c["name"] for c in schema.get_columns(table)}
            for col in {"repo", "name"} & cols:
                found = db.read(f"SELECT 1 FROM {table} WHERE {col}=:key", {"key": key})
                assert not found, table
        names = [c.name for c in get_vectors().client.list_collections()]
        assert not [n for n in names if n.startswith(prefixes)], names
        assert not (tmp_path / "data" / "repos" / key).exists()
        assert client.get("/repos/proj/refs").json() == []
        assert _search(client, "order service create")


@pytest.mark.slow
def test_refs_at_registration_tags_and_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coderag_app.server import create_app

    root = tmp_path / "proj"
    _repo(root)
    data = tmp_path / "data"
    with TestClient(create_app()) as client:
        bad = client.post("/repos", json={"name": "proj", "path": str(root), "refs": ["nope"]})
        assert bad.status_code == 404 and "nope" in bad.json()["detail"]
        assert client.get("/repos").json() == []  # nothing half-registered

        parsed = _parsed_paths(monkeypatch)
        body = {"name": "proj", "path": str(root), "refs": ["v1", "feature"]}
        assert client.post("/repos", json=body).status_code == 202
        waiting = client.get("/repos/proj/refs/feature").json()
        assert waiting["status"] == "queued" and "waiting" in waiting["progress"]
        _ref_state(client, "proj", "feature")
        # the refs waited for the repository's index and forked from it: the tag is its commit
        # (nothing read), the branch read its changed and added files
        main_files = client.get("/repos/proj").json()["files"]
        assert len(parsed) == main_files + 2
        tag = _ref_state(client, "proj", "v1")
        assert tag["commit"] == git.Repo(root).tags["v1"].commit.hexsha
        assert "reconcile_ledger_entries" not in _search(client, "reconcile ledger entries", "v1")

        unknown = client.post("/search", json={"query": "x", "repo": "proj", "ref": "gone"})
        assert unknown.status_code == 404 and "POST /repos/proj/refs" in unknown.json()["detail"]
        assert client.post("/repos/proj/refs", json={"ref": "feature"}).status_code == 409
        assert client.post("/repos/proj/refs", json={"ref": "no-such"}).status_code == 404
        assert client.post("/repos/proj/refs", json={"ref": "bad..name"}).status_code in (400, 422)
        assert client.delete("/repos/proj/refs/main").status_code in (400, 404)

        # deleting the repository deletes its refs, clones included
        keys = [ref_key("proj", r) for r in ("v1", "feature")]
        assert all((data / "repos" / k).is_dir() for k in keys)
        assert client.delete("/repos/proj").status_code == 204
        assert not get_catalog().db.read("SELECT name FROM repos")
        assert not any((data / "repos" / k).exists() for k in keys)
        assert not get_catalog().db.read("SELECT 1 FROM units")


def test_a_push_to_a_ref_updates_that_ref_incrementally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coderag_app.server import create_app

    monkeypatch.setenv("CODERAG_URL_SCHEMES", "https,file")  # the 'remote' is a local bare repo
    monkeypatch.setenv("CODERAG_WEBHOOK_SECRET", SECRET)
    get_settings.cache_clear()
    work, url = make_remote(tmp_path)
    work.git.checkout("-b", "release")
    work.git.push("origin", "release")
    work.git.checkout("main")
    with TestClient(create_app()) as client:
        body = {"name": "shop", "url": url, "branch": "main", "refs": ["release"]}
        assert client.post("/repos", json=body).status_code == 202
        _ref_state(client, "shop", "release")
        parsed = _parsed_paths(monkeypatch)

        work.git.checkout("release")
        (Path(work.working_dir) / "refunds.py").write_text(
            'def refund_payment(payment_id: str) -> bool:\n    """Refund a payment."""\n'
            "    return True\n"
        )
        sha = commit_all(work, "refund")
        work.git.push("origin", "release")
        status, out, _ = github_push(client, push_payload(url, "release", sha))
        assert status == 202 and out["repos"] == [ref_key("shop", "release")], out

        assert _ref_state(client, "shop", "release")["commit"] == sha
        assert parsed == ["refunds.py"]  # incremental: the one file the push added
        found = client.post(
            "/search", json={"query": "refund payment", "repo": "shop", "ref": "release"}
        ).json()["results"]
        assert found[0]["symbol"] == "refund_payment"
        default = client.post("/search", json={"query": "refund payment", "repo": "shop"})
        assert "refund_payment" not in [h["symbol"] for h in default.json()["results"]]
        assert client.get("/repos/shop").json()["commit"] != sha  # main did not move


@pytest.mark.slow
def test_mcp_tools_take_ref(tmp_path: Path, data_dir: Path) -> None:
    import anyio
    import httpx
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.liveserver import live_server
    from tests.test_mcp import _data

    root = tmp_path / "proj"
    _repo(root)
    with live_server(data_dir) as base:
        body = {"name": "proj", "path": str(root), "refs": ["feature"]}
        assert httpx.post(f"{base}/repos", json=body).status_code == 202
        deadline = time.monotonic() + 300
        while httpx.get(f"{base}/repos/proj/refs/feature").json()["complete"] is not True:
            assert time.monotonic() < deadline
            time.sleep(0.5)

        async def tools() -> None:
            async with (
                httpx2.AsyncClient(timeout=120) as http,
                Client(streamable_http_client(f"{base}/mcp", http_client=http)) as c,
            ):
                repos = _data(await c.call_tool("list_repos", {}))
                assert [r["refs"] for r in repos] == [["feature"]]
                query = {"query": "reconcile ledger entries", "repo": "proj", "top_k": 3}
                hits = _data(await c.call_tool("search_code", {**query, "ref": "feature"}))
                assert hits[0]["symbol"] == "reconcile_ledger_entries"
                at_ref = {"repo": "proj", "file": "python/ledger.py", "ref": "feature"}
                text = _data(await c.call_tool("read_range", at_ref))["text"]
                assert "reconcile_ledger_entries" in text
                missing = await c.call_tool("read_range", {**at_ref, "ref": None})
                assert missing.is_error  # the default branch has no such file
                found = {"repo": "proj", "prefix": "reconcile"}
                assert _data(await c.call_tool("symbols", {**found, "ref": "feature"}))
                assert not _data(await c.call_tool("symbols", found))

        anyio.run(tools)
