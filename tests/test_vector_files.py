"""Deleting a ref or a repository leaves nothing of it on disk: every file under the data
directory, and under a Chroma server's folder, is one that was there before the repository was
registered, with embedded Chroma and with the Chroma server the product runs (``coderag chroma``).
Chroma 1.x itself drops a deleted collection's rows but keeps its HNSW segment folder, as plain
``chroma run`` shows here."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag.settings import get_settings
from coderag.store import get_vectors, reset_stores
from coderag.store.vectors import make_client
from harness.procs import start_chroma, stop
from tests.conftest import wait_ready
from tests.test_refs import _ref_state, _repo


def files(folder: Path) -> set[str]:
    """Every file under ``folder``, by its path relative to it."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def segments(folder: Path) -> set[str]:
    """The segment folders in a Chroma data folder."""
    return {p.name for p in folder.iterdir() if p.is_dir() and len(p.name) == 36}


def settled(folders: list[Path], want: dict[Path, set[str]], wait_s: float) -> dict:
    """The folders' files once they equal ``want`` or ``wait_s`` has passed (a sweep's delay)."""
    deadline = time.monotonic() + wait_s
    while True:
        got = {f: files(f) for f in folders}
        if got == want or time.monotonic() >= deadline:
            return got
        time.sleep(0.2)


def delete_ref_then_repository(tmp_path: Path, chroma: Path, folders: list[Path], wait_s: float):
    """Register a real repository (four languages) and index it with the real encoders, index
    its branch ``feature`` as a ref, delete the ref, then the repository; the files must be
    those before the ref and then those before the repository, allowing ``wait_s`` for a sweep."""
    from coderag_app.server import create_app

    root = tmp_path / "proj"
    _repo(root)
    with TestClient(create_app()) as client:
        get_vectors().heartbeat()  # embedded Chroma makes its own database at first use
        before = {f: files(f) for f in folders}
        assert client.post("/repos", json={"name": "proj", "path": str(root)}).status_code == 202
        assert wait_ready(client, "proj")["status"] == "ready"
        with_repo, repo_segments = {f: files(f) for f in folders}, segments(chroma)
        assert len(repo_segments) >= 2, "one segment folder per encoder's collection"
        assert client.post("/repos/proj/refs", json={"ref": "feature"}).status_code == 202
        _ref_state(client, "proj", "feature")
        assert len(segments(chroma) - repo_segments) >= 2, "the ref's own vectors"

        assert client.delete("/repos/proj/refs/feature").status_code == 204
        assert settled(folders, with_repo, wait_s) == with_repo
        assert client.get("/repos/proj").json()["status"] == "ready"

        assert client.delete("/repos/proj").status_code == 204
        assert settled(folders, before, wait_s) == before
        assert segments(chroma) == set()


@pytest.mark.slow
def test_embedded_chroma_keeps_nothing_of_a_deleted_ref_or_repository(
    tmp_path: Path, data_dir: Path
) -> None:
    delete_ref_then_repository(tmp_path, data_dir / "chroma", [data_dir], wait_s=0)


@pytest.mark.slow
def test_the_chroma_server_keeps_nothing_of_a_deleted_ref_or_repository(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "chroma-server"
    proc, url = start_chroma(folder, sweep_every=0.5)
    try:
        monkeypatch.setenv("CODERAG_CHROMA_URL", url)
        get_settings.cache_clear()
        reset_stores()
        delete_ref_then_repository(tmp_path, folder, [data_dir, folder], wait_s=30)
    finally:
        stop(proc)


@pytest.mark.slow
def test_plain_chroma_run_keeps_a_deleted_collections_folder(tmp_path: Path) -> None:
    """Why the product runs its own: if Chroma starts removing the folders, this fails and
    ``coderag chroma`` can go."""
    folder = tmp_path / "plain"
    proc, url = start_chroma(folder)
    try:
        client = make_client(url, tmp_path)
        col = client.create_collection("gone", embedding_function=None)
        col.add(ids=[str(i) for i in range(50)], embeddings=[[i, 1.0, 0.5] for i in range(50)])
        deadline = time.monotonic() + 30
        while not segments(folder) and time.monotonic() < deadline:
            time.sleep(0.2)
        kept = segments(folder)
        assert kept, "Chroma wrote the collection's segment folder"
        client.delete_collection("gone")
        time.sleep(2)
        assert segments(folder) == kept
    finally:
        stop(proc)
