"""Git reads nothing outside the allowed directories, shows readers none of its output, and never
blocks on a special file (issue 45, findings 1, 2 and 6).

Real repositories in temp folders: a ``vault`` outside ``CODERAG_REPO_ROOTS`` holds a secret;
directories under the roots reach it through a gitfile, a ``.git`` link, ``commondir``,
``objects/info/alternates`` and a link under ``refs``. Each is refused at registration (by path
and by file:// URL) with a 403 that names no target, and a repository that turns hostile after
it was registered is refused at the next view. A ``packed-refs`` or ``shallow`` linked to a file
under the roots makes git fail quoting that file: readers see a generic reason. A FIFO, a huge
sparse file or ``/dev/zero`` as ``HEAD``, ``commondir`` or a gitfile is refused at once.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coderag import gitsafe
from coderag.settings import get_settings
from coderag_app.server import create_app
from tests.conftest import wait_ready

SECRET = "VAULT-SECRET-7f3a"
"""A line only the repository outside the roots holds."""

LEAK = "TOPSECRET-LINE-42 hello"
"""The first line of a file a hostile repository links its packed-refs or shallow to."""


def _git(root: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
    }
    done = subprocess.run(
        ["git", "-C", str(root), *args], env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def make_repo(root: Path, files: dict[str, str]) -> str:
    """A git repository at ``root`` with ``files`` committed on ``main``; its commit."""
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "-c", "commit.gpgsign=false", "commit", "-qm", "initial")
    return _git(root, "rev-parse", "HEAD")


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(the only allowed root, a folder outside it holding the ``vault`` repository)."""
    roots, outside = tmp_path / "roots", tmp_path / "outside"
    roots.mkdir()
    make_repo(outside / "vault", {"vault.py": f'TOKEN = "{SECRET}"\n'})
    monkeypatch.setenv("CODERAG_REPO_ROOTS", str(roots))
    monkeypatch.setenv("CODERAG_URL_SCHEMES", "https,file")
    get_settings.cache_clear()
    return roots, outside


@pytest.fixture
def client(places: tuple[Path, Path]) -> Iterator[TestClient]:
    with TestClient(create_app()) as c:
        yield c


def escaping(roots: Path, outside: Path) -> dict[str, Path]:
    """Directories under ``roots`` whose git data is the vault's, one per way out."""
    vault = outside / "vault" / ".git"
    out: dict[str, Path] = {}

    gitfile = roots / "gitfile"
    gitfile.mkdir()
    (gitfile / ".git").write_text(f"gitdir: {vault}\n")
    (gitfile / "vault.py").write_text("x = 1\n")
    out["gitfile"] = gitfile

    linked = roots / "linked"
    linked.mkdir()
    (linked / ".git").symlink_to(vault)
    out["linked"] = linked

    common = roots / "common"
    (common / ".git").mkdir(parents=True)
    (common / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (common / ".git" / "commondir").write_text(f"{vault}\n")
    out["commondir"] = common

    alternates = roots / "alternates"
    make_repo(alternates, {"a.py": "a = 1\n"})
    head = _git(outside / "vault", "rev-parse", "HEAD")
    (alternates / ".git" / "objects" / "info" / "alternates").write_text(f"{vault}/objects\n")
    (alternates / ".git" / "refs" / "heads" / "main").write_text(f"{head}\n")
    out["alternates"] = alternates

    ref_link = roots / "reflink"
    make_repo(ref_link, {"b.py": "b = 1\n"})
    (ref_link / ".git" / "refs" / "heads" / "vault").symlink_to(vault / "refs" / "heads" / "main")
    out["ref link"] = ref_link
    return out


def test_a_repository_reaching_outside_the_roots_is_refused_at_registration(
    client: TestClient, places: tuple[Path, Path]
) -> None:
    roots, outside = places
    for way, root in escaping(roots, outside).items():
        for body in ({"path": str(root)}, {"url": root.as_uri()}):
            name = f"r{abs(hash((way, str(body)))) % 10**8}"
            r = client.post("/repos", json={"name": name, **body})
            assert r.status_code == 403, (way, body, r.text)
            detail = r.json()["detail"]
            assert "outside" in detail and "CODERAG_REPO_ROOTS" in detail, (way, detail)
            assert str(outside) not in detail, (way, detail)
        with pytest.raises(gitsafe.Refused):
            gitsafe.view(root)
    assert client.get("/repos").json() == []


def test_a_repository_turning_hostile_after_registration_is_refused_at_the_next_view(
    client: TestClient, places: tuple[Path, Path]
) -> None:
    roots, outside = places
    root = roots / "shop"
    make_repo(root, {"shop.py": "def pay():\n    return 1\n"})
    assert client.post("/repos", json={"name": "shop", "path": str(root)}).status_code == 202
    assert wait_ready(client, "shop", timeout=600)["status"] == "ready"
    gitsafe.view(root)  # fine so far

    vault_objects = outside / "vault" / ".git" / "objects"
    (root / ".git" / "objects" / "info" / "alternates").write_text(f"{vault_objects}\n")
    with pytest.raises(gitsafe.Refused):
        gitsafe.view(root)
    # the reader's routes that run git refuse it too, and show nothing of the vault
    r = client.post("/repos/shop/history", json={"ranges": [{"file": "shop.py", "start_line": 1}]})
    assert SECRET not in r.text and str(outside) not in r.text, r.text
    assert client.post("/repos/shop/reindex").status_code == 202
    state = wait_ready(client, "shop", timeout=600)
    # the reindex reads the work tree as plain files: git, and so the vault, stays out of it
    assert state["status"] == "ready" and state["commit"] is None, state


def test_a_file_url_is_never_cloned_from_a_repository_refused_after_registration(
    client: TestClient, places: tuple[Path, Path]
) -> None:
    """A file:// registration whose repository turns hostile before its clone: the clone is
    refused, not handed to git as it is."""
    roots, outside = places
    root = roots / "later"
    make_repo(root, {"c.py": "c = 1\n"})
    vault = outside / "vault" / ".git"
    (root / ".git" / "commondir").write_text(f"{vault}\n")
    with pytest.raises(gitsafe.Refused):
        gitsafe.upload_source(root.as_uri())


def test_git_output_never_reaches_a_reader(client: TestClient, places: tuple[Path, Path]) -> None:
    roots, _ = places
    secret_file = roots / "notes" / "private.txt"
    secret_file.parent.mkdir()
    secret_file.write_text(f"{LEAK}\n")
    for name, linked in (("packed", "packed-refs"), ("shallow", "shallow")):
        root = roots / name
        make_repo(root, {"m.py": "def m():\n    return 2\n"})
        if linked == "packed-refs":
            (root / ".git" / "refs" / "heads" / "main").unlink()  # main is read from packed-refs
        (root / ".git" / linked).symlink_to(secret_file)
        plain = subprocess.run(
            ["git", "-C", str(root), "log", "-1"], capture_output=True, text=True, check=False
        )
        assert LEAK in plain.stderr  # git itself quotes the file: the trap is live

        r = client.post("/repos", json={"name": name, "path": str(root)})
        assert r.status_code == 202, r.text
        state = wait_ready(client, name, timeout=600)
        assert state["status"] == "error", state
        for answer in (
            client.get(f"/repos/{name}"),
            client.get("/repos"),
            client.post("/search", json={"query": "what does m return", "repo": name}),
            client.post("/ask", json={"query": "what does m return", "repo": name}),
            client.post(
                "/v1/chat/completions",
                json={
                    "model": f"coderag:{name}",
                    "messages": [{"role": "user", "content": "what does m return"}],
                },
            ),
        ):
            assert LEAK not in answer.text, answer.text
            assert "TOPSECRET" not in answer.text and "stderr" not in answer.text, answer.text
        assert client.get(f"/repos/{name}").json()["error"].endswith(gitsafe.GIT_FAILED)
        r = client.post("/search", json={"query": "what does m return", "repo": name})
        assert r.status_code == 409 and gitsafe.GIT_FAILED in r.json()["detail"], r.text


def test_git_output_reaches_an_admin_token_only(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    roots, _ = places
    secret_file = roots / "notes" / "private.txt"
    secret_file.parent.mkdir()
    secret_file.write_text(f"{LEAK}\n")
    root = roots / "packed"
    make_repo(root, {"m.py": "def m():\n    return 2\n"})
    (root / ".git" / "refs" / "heads" / "main").unlink()
    (root / ".git" / "packed-refs").symlink_to(secret_file)
    monkeypatch.setenv("CODERAG_API_TOKENS", "ada:admin-token:admin,bob:reader-token:reader")
    get_settings.cache_clear()
    admin = {"Authorization": "Bearer admin-token"}
    reader = {"Authorization": "Bearer reader-token"}
    with TestClient(create_app(), headers=admin) as client:
        r = client.post("/repos", json={"name": "packed", "path": str(root)})
        assert r.status_code == 202, r.text
        assert wait_ready(client, "packed", timeout=600)["status"] == "error"
        for path in ("/repos/packed", "/repos"):
            shown = client.get(path, headers=reader)
            assert shown.status_code == 200 and LEAK not in shown.text, shown.text
            told = client.get(path, headers=admin).json()
            state = told if path == "/repos/packed" else told[0]
            assert state["error"].endswith(gitsafe.GIT_FAILED), state
            # the admin reads what git said, as the server's log has it
            assert state["error_detail"] and "packed-refs" in state["error_detail"], state
            assert gitsafe.GIT_FAILED not in state["error_detail"], state
        assert client.get("/repos/packed", headers=reader).json()["error_detail"] is None


def _refused_quickly(client: TestClient, root: Path, name: str) -> None:
    """Registering ``root`` answers 403 within seconds (a FIFO read would block for ever)."""
    answer: list = []
    worker = threading.Thread(
        target=lambda: answer.append(client.post("/repos", json={"name": name, "path": str(root)})),
        daemon=True,
    )
    worker.start()
    worker.join(30)
    assert answer, f"registering {name} blocked"
    r = answer[0]
    assert r.status_code == 403, r.text
    assert "regular file" in r.json()["detail"] or "bytes" in r.json()["detail"], r.text


def test_special_files_as_head_commondir_or_gitfile_are_refused_without_blocking(
    client: TestClient, places: tuple[Path, Path]
) -> None:
    roots, _ = places
    fifos: list[Path] = []
    try:
        # commondir a FIFO: reading it waits for a writer that never comes
        fifo_common = roots / "fifocommon"
        make_repo(fifo_common, {"f.py": "f = 1\n"})
        fifos.append(fifo_common / ".git" / "commondir")
        os.mkfifo(fifos[-1])
        _refused_quickly(client, fifo_common, "fifocommon")

        # a gitfile that is a huge sparse file
        huge_gitfile = roots / "hugegitfile"
        huge_gitfile.mkdir()
        with (huge_gitfile / ".git").open("wb") as f:
            f.write(b"gitdir: ")
            f.truncate(3 << 30)
        _refused_quickly(client, huge_gitfile, "hugegitfile")

        # HEAD a huge sparse file, then HEAD a FIFO
        huge_head = roots / "hugehead"
        make_repo(huge_head, {"h.py": "h = 1\n"})
        head = huge_head / ".git" / "HEAD"
        with head.open("r+b") as f:
            f.seek(0, 2)
            f.truncate(3 << 30)
        _refused_quickly(client, huge_head, "hugehead")
        head.unlink()
        os.mkfifo(head)
        fifos.append(head)
        with pytest.raises(gitsafe.Refused):
            gitsafe.view(huge_head)

        # a gitfile that is a FIFO, and a loose ref that is one
        fifo_gitfile = roots / "fifogitfile"
        fifo_gitfile.mkdir()
        fifos.append(fifo_gitfile / ".git")
        os.mkfifo(fifos[-1])
        _refused_quickly(client, fifo_gitfile, "fifogitfile")
        fifo_ref = roots / "fiforef"
        make_repo(fifo_ref, {"r.py": "r = 1\n"})
        fifos.append(fifo_ref / ".git" / "refs" / "heads" / "stuck")
        os.mkfifo(fifos[-1])
        _refused_quickly(client, fifo_ref, "fiforef")
    finally:
        for fifo in fifos:  # wake any reader a failing run left blocked
            if fifo.exists():
                try:
                    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                    os.close(fd)
                except OSError:
                    pass


def test_dev_zero_linked_inside_the_roots_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/dev/zero`` as HEAD, with ``/dev`` allowed: refused as a device, not read for ever."""
    root = tmp_path / "zero"
    make_repo(root, {"z.py": "z = 1\n"})
    monkeypatch.setenv("CODERAG_REPO_ROOTS", f"{tmp_path},/dev")
    get_settings.cache_clear()
    head = root / ".git" / "HEAD"
    head.unlink()
    head.symlink_to("/dev/zero")
    with pytest.raises(gitsafe.Refused, match="regular file"):
        gitsafe.locate(root)
