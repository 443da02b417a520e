"""Symbolic links are never followed: neither the full walk nor the incremental path of a push
reads a committed link to a file outside the repository or to another repository's file."""

from __future__ import annotations

import os
from pathlib import Path

import git
import pytest

from coderag.store import get_catalog
from coderag_parser.files import read_source, regular_file
from tests.conftest import commit_all, parse


@pytest.fixture(autouse=True)
def one_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """One encoder is enough to index; the second would only double the time."""
    from coderag.settings import get_settings

    monkeypatch.setenv("CODERAG_EMBED_MODEL_2", "")
    get_settings.cache_clear()


def indexed_text(repo: str) -> str:
    """Every unit text of a repository, joined."""
    return "\n".join(u.text for u in get_catalog().units(repo))


def test_links_committed_after_a_full_index_are_not_read_on_the_next_push(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd.py").write_text("ROOT_SECRET_OUTSIDE = 'hunter2'\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "private.py").write_text("def other_team_private():\n    return 'OTHER_REPO_CODE'\n")
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "app.py").write_text("def main():\n    return 1\n")
    repo = git.Repo.init(root)
    commit_all(repo, "first")
    cat = get_catalog()
    cat.create_repo("links", str(root), None, None)
    assert parse("links").full_walk

    os.symlink(outside / "passwd.py", root / "pkg" / "passwd.py")
    os.symlink(other / "private.py", root / "pkg" / "borrowed.py")
    os.symlink(other, root / "linked_dir")
    (root / "pkg" / "app.py").write_text("def main():\n    return 2\n")
    commit_all(repo, "links to files outside")
    assert not parse("links").full_walk, "the push takes the incremental path"
    assert set(cat.file_shas("links")) == {"pkg/app.py"}
    text = indexed_text("links")
    assert "return 2" in text
    assert "ROOT_SECRET_OUTSIDE" not in text and "OTHER_REPO_CODE" not in text

    # dirty (uncommitted) links in the work tree are candidates too
    os.symlink(outside / "passwd.py", root / "pkg" / "dirty_link.py")
    (root / "pkg" / "app.py").write_text("def main():\n    return 3\n")
    parse("links")
    assert set(cat.file_shas("links")) == {"pkg/app.py"}
    assert "ROOT_SECRET_OUTSIDE" not in indexed_text("links")

    # and a full walk (after an error the next index walks everything) skips them as well
    cat.update_repo("links", status="error")
    assert parse("links").full_walk
    assert set(cat.file_shas("links")) == {"pkg/app.py"}


def test_regular_file_refuses_links_on_the_way(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.py").write_text("x = 1\n")
    os.symlink(tmp_path / "real", tmp_path / "via")
    os.symlink(tmp_path / "real" / "a.py", tmp_path / "b.py")
    assert regular_file(tmp_path, "real/a.py")
    assert not regular_file(tmp_path, "via/a.py")
    assert not regular_file(tmp_path, "b.py")
    assert not regular_file(tmp_path, "../real/a.py")
    assert not regular_file(tmp_path, "real")
    assert read_source(tmp_path / "b.py", 1000) == (None, "symlink")
    assert read_source(tmp_path / "real" / "a.py", 1000) == ("x = 1\n", "")
