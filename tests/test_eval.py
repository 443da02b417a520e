"""``coderag eval``: the self-check through its real process on a real git repository (commits and
docstrings), indexed for real; and the pure rules it is made of (trivial commit subjects, first
sentences, doc stripping, the question sample)."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from coderag.schemas import Unit
from coderag_retriever.selfcheck import (
    Question,
    commit_questions,
    first_sentence,
    is_trivial,
    sample,
    strip_docs,
)
from tests.conftest import commit_all
from tests.test_cli import coderag

RETRY = '''"""HTTP client helpers."""

import random


def retry_delay(attempt: int, base: float = 0.5) -> float:
    """Compute how long the client waits before the next retry attempt."""
    return base * (2**attempt) + random.random() / 10


def should_retry(status: int) -> bool:
    """Tell whether a response status is worth another request."""
    return status in (429, 502, 503, 504)
'''

CONFIG = '''"""Settings."""

import configparser


def parse_ini_sections(path: str) -> dict:
    """Read the configuration file into a dictionary of sections."""
    parser = configparser.ConfigParser()
    parser.read(path)
    return {name: dict(parser[name]) for name in parser.sections()}


def merge_overrides(base: dict, overrides: dict) -> dict:
    """Layer the override values on top of the base settings."""
    out = dict(base)
    out.update(overrides)
    return out


def add(a: int, b: int) -> int:
    """Summon the purple elephant of Zanzibar quickly."""
    return a + b
'''

SHAPES = '''"""Geometry."""


class Rectangle:
    """An axis-aligned rectangle with its width and height."""

    def __init__(self, width: float, height: float) -> None:
        self.width = width
        self.height = height

    def area(self) -> float:
        """Multiply the width by the height of the rectangle."""
        return self.width * self.height


def circle_area(radius: float) -> float:
    """Circle area."""
    return 3.14159 * radius * radius


def perimeter(width: float, height: float) -> float:
    return 2 * (width + height)
'''


def commits(root: Path, *steps: tuple[dict[str, str], str]) -> git.Repo:
    """A new git repository at ``root`` with one commit per step: its files written, its
    message."""
    root.mkdir()
    repo = git.Repo.init(root)
    for files, message in steps:
        for name, text in files.items():
            (root / name).write_text(text)
        commit_all(repo, message)
    return repo


def make_repo(root: Path) -> Path:
    """A git repository whose commits and docstrings make the questions."""
    commits(
        root,
        ({"shapes.py": SHAPES}, "Geometry helpers for rectangles and circles"),
        ({"config.py": CONFIG}, "Parse the INI configuration file into sections"),
        ({"notes.txt": "release notes\n"}, "fix"),
        ({"client.py": RETRY}, "Exponential backoff for the retry delay of the client"),
        ({"VERSION": "1.2.3\n"}, "Bump version to 1.2.3"),
    )
    return root


@pytest.mark.slow
def test_eval_through_its_process(tmp_path: Path, data_dir: Path) -> None:
    root = make_repo(tmp_path / "team")
    r = coderag(data_dir, "index", str(root), "--name", "team")
    assert r.returncode == 0, r.stderr

    r = coderag(data_dir, "eval", "team", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["repo"] == "team"
    items = out["items"]
    queries = {i["query"]: i for i in items}
    assert out["questions"] == {
        "commit": sum(i["kind"] == "commit" for i in items),
        "doc": sum(i["kind"] == "doc" for i in items),
    }
    assert out["questions"]["commit"] >= 2 and out["questions"]["doc"] >= 5
    # trivial subjects and commits that changed no code unit make no question
    assert "fix" not in queries and "Bump version to 1.2.3" not in queries
    for kind in ("commit", "doc", "all"):
        row = out["results"][kind]
        for system in ("coderag", "bm25"):
            assert set(row[system]) == {"r_at_1", "r_at_5", "mrr_at_10"}
            assert all(0.0 <= v <= 1.0 for v in row[system].values())
    assert out["results"]["all"]["n"] == len(items)
    assert "reference" in out
    assert out["reference"] is None or out["reference"]["kinds"]["doc"]["code_bases"] >= 1

    backoff = queries["Exponential backoff for the retry delay of the client"]
    assert backoff["kind"] == "commit" and "client.py:6-8" in backoff["gold"]
    assert backoff["coderag"] is not None and backoff["coderag"] <= 3
    sections = queries["Read the configuration file into a dictionary of sections."]
    assert sections["gold"] == ["config.py:6-10"] and sections["coderag"] == 1
    # the doc's words are not in what is searched: a doc unrelated to its code is not found
    elephant = queries["Summon the purple elephant of Zanzibar quickly."]
    assert elephant["coderag"] is None and elephant["bm25"] is None
    assert "Circle area." not in queries  # too short to ask with

    r = coderag(data_dir, "eval", "team", "--limit", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(
        "self-check of team: 3 questions (1 from commit messages, 2 from doc"
    )
    assert "coderag R@1" in r.stdout and "vector routes not measured" in r.stdout
    # the benchmark's figures (or the word that none shipped) stand beside this repository's
    assert "pinned code bases" in r.stdout or "no reference shipped" in r.stdout
    assert "no pinned reference" in r.stdout or "no reference shipped" in r.stdout

    r = coderag(data_dir, "eval", "nope")
    assert r.returncode == 2 and "no repository named 'nope'" in r.stderr
    r = coderag(data_dir, "eval", "team", "--limit", "0")
    assert r.returncode == 2 and "--limit must be at least 1" in r.stderr


def test_trivial_subjects() -> None:
    for subject in (
        "fix",
        "wip",
        "Merge branch 'main' into dev",
        "Bump version to 2.0.1",
        "v1.4.0",
        "Release 3.1",
        'Revert "Add the cache"',
        "fixup! Add the cache",
    ):
        assert is_trivial(subject), subject
    assert not is_trivial("Retry the upload when the server answers 503")
    assert first_sentence("Compute the delay. More text here.") is None
    assert first_sentence("Compute the retry delay. More.") == "Compute the retry delay."


def _unit(
    file: str,
    start: int,
    text: str,
    doc: str = "",
    symbol: str = "f",
    language: str = "python",
    kind: str = "function",
) -> Unit:
    end = start + text.count("\n")
    return Unit(
        repo="r",
        file=file,
        start_line=start,
        end_line=end,
        symbol=symbol,
        kind=kind,
        language=language,
        doc=doc,
        text=text,
    )


def test_strip_docs_removes_doc_lines_of_the_whole_file() -> None:
    method = _unit(
        "a.py",
        5,
        'def area(self):\n    """Multiply the width\n    by height."""\n    return self.w * self.h',
        doc="Multiply the width\nby height.",
    )
    header = _unit("a.py", 1, 'class R:\n    """Multiply the width\n    by height."""', symbol="R")
    block = _unit("b.go", 1, "// Multiply the width\nfunc area() int { return w * h }")
    stripped = strip_docs([method, header, block])
    assert [(u.start_line, u.end_line) for u in stripped] == [(5, 8), (1, 3), (1, 2)]
    assert "Multiply" not in stripped[0].text and "return self.w * self.h" in stripped[0].text
    assert stripped[0].doc == "" and "Multiply" not in stripped[1].text
    assert stripped[2].text == block.text  # another file's doc is not this one's


def test_sample_halves_and_fills() -> None:
    commits = [Question("commit", f"c{i}", [i]) for i in range(10)]
    docs = [Question("doc", f"d{i}", [i]) for i in range(3)]
    picked = sample(commits, docs, 8)
    assert sum(q.kind == "doc" for q in picked) == 3 and len(picked) == 8
    assert sample(commits, docs, 8) == picked
    assert len(sample(commits, docs, 100)) == 13
    assert sum(q.kind == "commit" for q in sample(commits, docs * 10, 6)) == 3


README = "# Shop\n\nSponsors of the shop are thanked here.\n"
ORDERS = "def total(prices: list[float]) -> float:\n    return sum(prices)\n"


def test_commit_questions_have_code_gold_only(tmp_path: Path) -> None:
    root = tmp_path / "shop"
    commits(
        root,
        ({"README.md": README}, "Add sponsorship page to the docs (#2877)"),
        ({"orders.py": ORDERS}, "Sum the prices of an order's lines"),
        (
            {
                "README.md": README + "\nThe total sums the prices.\n",
                "orders.py": ORDERS.replace("sum(prices)", "float(sum(prices))"),
            },
            "Return the order total as a float everywhere",
        ),
    )
    units = [
        _unit(
            "README.md", 1, README.rstrip("\n"), symbol="Shop", language="markdown", kind="section"
        ),
        _unit(
            "README.md",
            5,
            "The total sums the prices.",
            symbol="Shop",
            language="markdown",
            kind="section",
        ),
        _unit("orders.py", 1, ORDERS.rstrip("\n"), symbol="total"),
    ]
    questions = {q.query: q.gold for q in commit_questions(root, units)}
    # a commit that only changed Markdown has no code to find: no question
    assert "Add sponsorship page to the docs (#2877)" not in questions
    # the code commit's gold is the code unit, and a mixed commit's gold leaves its docs out
    assert questions["Return the order total as a float everywhere"] == [2]
    assert questions["Sum the prices of an order's lines"] == [2]
    assert len(questions) == 2


@pytest.mark.slow
def test_eval_says_so_when_a_reindex_swaps_the_index_under_it(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the fifth trial's `coderag eval`, run while a reindex finished, died with a KeyError
    from coderag.errors import Conflict
    from coderag.jobs import IndexRepo
    from coderag.queue import run_now
    from coderag.settings import get_settings
    from coderag.store import get_catalog
    from coderag_retriever import selfscore

    root = make_repo(tmp_path / "team")
    get_catalog().create_repo("team", str(root), None, None)
    run_now(IndexRepo(repo="team"))
    searched = selfscore.rank

    def rank_after_a_reindex(*args: object, **kwargs: object) -> object:
        # every unit of client.py moves down two lines, so its ids change
        (root / "client.py").write_text("# moved\n\n" + RETRY)
        commit_all(git.Repo(root), "Move the client helpers down")
        run_now(IndexRepo(repo="team"))
        monkeypatch.setattr(selfscore, "rank", searched)
        return searched(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(selfscore, "rank", rank_after_a_reindex)
    with pytest.raises(Conflict, match="reindexed while it was being evaluated"):
        selfscore.evaluate("team", root, 10, get_settings())
    # once the index holds still, the same run completes
    report = selfscore.evaluate("team", root, 10, get_settings())
    assert report.ranks["coderag"], report
