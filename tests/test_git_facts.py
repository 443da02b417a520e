"""Git facts of a line range name the newest commit that touched any of its lines: a function whose
last line alone was changed by a later commit is cited with that commit and its author, both by the
history route (citations) and in the unit facts the parser stores, even when the two commits share
a second, the later committer's clock is behind, or the file was renamed since."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from coderag import chain
from coderag.jobs import IndexRepo
from coderag.schemas import Unit
from coderag.store import get_catalog
from coderag_parser import file_rows, line_history, parsing, tasks

SOURCE = '''"""Prices."""


def total(items):
    subtotal = sum(i["price"] for i in items)
    tax = subtotal * 0.2
    return subtotal + tax


def count(items):
    return len(items)
'''
"""Commit 1's file: ``total`` is written whole."""

LAST_LINE = "    return subtotal + tax"
"""``total``'s last line, the only line commit 2 changes."""

CASES = {
    # (commit 1 date, commit 2 date, rename the file in a third commit)
    "distinct_times": ("2024-01-01T10:00:00Z", "2024-02-01T10:00:00Z", False),
    "same_second": ("2024-01-01T10:00:00Z", "2024-01-01T10:00:00Z", False),
    "clock_behind": ("2024-01-01T10:00:00Z", "2023-06-01T10:00:00Z", False),
    "renamed_since": ("2024-01-01T10:00:00Z", "2024-02-01T10:00:00Z", True),
}
"""How the two commits are dated, and whether the file moves afterwards."""


def git(root: Path, *args: str, who: str = "", when: str = "") -> str:
    """Run git in ``root`` as ``who`` at ``when``, away from any user or system configuration."""
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": who or "Nobody",
        "GIT_AUTHOR_EMAIL": f"{who.lower() or 'nobody'}@example.com",
        "GIT_COMMITTER_NAME": who or "Nobody",
        "GIT_COMMITTER_EMAIL": f"{who.lower() or 'nobody'}@example.com",
        "GIT_AUTHOR_DATE": when or "2024-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": when or "2024-01-01T00:00:00Z",
    }
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def commit(root: Path, message: str, who: str, when: str) -> str:
    """Stage everything and commit it as ``who`` at ``when``; the new commit's full hash."""
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message, who=who, when=when)
    return git(root, "rev-parse", "HEAD")


def make_repo(root: Path, case: str) -> tuple[str, str, str]:
    """Commit 1 (Alice) writes ``total``; commit 2 (Bob) changes only its last line; the file's
    path now, and the two hashes."""
    first_when, second_when, rename = CASES[case]
    root.mkdir()
    git(root, "init", "-q")
    path = root / "prices.py"
    path.write_text(SOURCE)
    first = commit(root, "prices", "Alice", first_when)
    path.write_text(SOURCE.replace(LAST_LINE, "    return round(subtotal + tax, 2)"))
    second = commit(root, "round the total", "Bob", second_when)
    rel = "prices.py"
    if rename:
        git(root, "mv", rel, "billing.py")
        commit(root, "move prices", "Carol", "2024-03-01T10:00:00Z")
        rel = "billing.py"
    return rel, first, second


def parsed_units(root: Path, rel: str) -> dict[str, Unit]:
    """The units the parser cuts from ``rel``, by symbol."""
    out = file_rows.parse_file(file_rows.FileJob("facts", str(root), rel, "python", 1 << 20, ""))
    assert isinstance(out, file_rows.FileRows), out
    return {u.symbol: u for u in out.units}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_range_names_the_commit_that_changed_its_last_line(tmp_path: Path, case: str) -> None:
    root = tmp_path / "repo"
    rel, first, second = make_repo(root, case)
    units = parsed_units(root, rel)
    fn = units["total"]
    lines = (root / rel).read_text().splitlines()
    assert lines[fn.end_line - 1] == "    return round(subtotal + tax, 2)"  # commit 2's line
    assert all(ln in SOURCE for ln in lines[fn.start_line - 1 : fn.end_line - 1])  # commit 1's

    # what a citation of the whole function carries (the history route's last commit)
    last = line_history.last_commit(root, rel, fn.start_line, fn.end_line)
    assert last is not None
    assert (last.commit, last.author) == (second[:7], "Bob"), last
    assert last.summary == "round the total"
    # a range of commit 1's lines alone still names commit 1
    head = line_history.last_commit(root, rel, fn.start_line, fn.end_line - 1)
    assert head is not None and (head.commit, head.author) == (first[:7], "Alice"), head

    # what the parser's blame stage computes for each unit
    spans = [(u.symbol, u.start_line, u.end_line) for u in units.values()]
    facts = {uid: (c, a) for uid, c, a, _ in parsing.blame_file((str(root), rel, spans))}
    assert facts["total"] == (second, "Bob"), facts
    assert facts["count"] == (first, "Alice"), facts


@pytest.mark.parametrize("case", ["same_second", "renamed_since"])
def test_indexed_units_store_the_newest_commit_of_their_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    root = tmp_path / "repo"
    rel, first, second = make_repo(root, case)
    queued: list[Any] = []
    monkeypatch.setattr(chain, "enqueue", queued.append)  # the parser's job alone: no vectors
    catalog = get_catalog()
    catalog.create_repo("facts", str(root), None, None)
    tasks.index_repo(IndexRepo(repo="facts"))
    assert queued and catalog.unblamed_files("facts") == []
    stored = {u.symbol: u for u in catalog.units("facts", [rel])}
    assert (stored["total"].last_commit, stored["total"].last_author) == (second, "Bob")
    assert (stored["count"].last_commit, stored["count"].last_author) == (first, "Alice")
