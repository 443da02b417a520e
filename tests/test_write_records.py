"""The parser's write path in typed records (issue 42): a file's rows name the units that hold
them and come back whole from a parser process, and ``update_repo`` takes values, encoding the
dirty paths itself in the JSON existing databases hold."""

from __future__ import annotations

import hashlib
import logging
import pickle
from pathlib import Path

import pytest

from coderag.store import Catalog, Database
from coderag_parser import parsing
from coderag_parser.file_rows import FileJob, FileRows, SkippedFile, parse_file

SOURCE = """import os
import os


class Cart:
    def total(self, items):
        return sum(self.price(i) for i in items)

    def price(self, item):
        return os.getenv(item)


LIMIT = 3
"""


def job(root: Path, path: str, max_bytes: int = 1 << 20) -> FileJob:
    """A job for a Python file of repository ``r``."""
    return FileJob("r", str(root), path, "python", max_bytes, r"(?i)\bdeprecated\b")


def test_a_files_rows_name_their_units_and_survive_pickling(tmp_path: Path) -> None:
    (tmp_path / "cart.py").write_text(SOURCE)
    rows = parse_file(job(tmp_path, "cart.py"))
    assert isinstance(rows, FileRows), rows
    sha = hashlib.sha1(SOURCE.encode()).hexdigest()
    assert tuple(rows.file) == ("cart.py", "python", SOURCE.count("\n") + 1, sha)
    ids = {u.symbol: u.id for u in rows.units}
    holder = {s.qualified: s.unit_id for s in rows.symbols}
    assert holder["Cart.total"] == ids["Cart.total"], rows.symbols
    assert holder["Cart.price"] == ids["Cart.price"], rows.symbols
    assert {c.caller_id for c in rows.calls if c.callee == "price"} == {ids["Cart.total"]}
    assert [tuple(i) for i in rows.imports] == [("cart.py", "os")]  # imported twice, one row
    assert pickle.loads(pickle.dumps(rows)) == rows  # what a parser process hands back

    skipped = parse_file(job(tmp_path, "cart.py", max_bytes=10))
    assert skipped == SkippedFile("cart.py", "too_large")


def test_the_parser_pool_returns_the_records_parsed_in_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = []
    for i in range(parsing.POOL_MIN_FILES):
        (tmp_path / f"m{i:02d}.py").write_text(SOURCE.replace("Cart", f"Cart{i}"))
        jobs.append(job(tmp_path, f"m{i:02d}.py"))
    jobs.append(job(tmp_path, "gone.py"))
    in_process = parsing.parse_all(jobs, 1, "r")
    assert in_process[-1] == SkippedFile("gone.py", "unreadable")
    with caplog.at_level(logging.WARNING, logger=parsing.__name__):
        assert parsing.parse_all(jobs, 2, "r") == in_process
    assert not caplog.records, "parsed on the pool, not in this process after it broke"


def test_update_repo_encodes_dirty_paths_and_keeps_the_columns_it_is_not_given(
    db: Database,
) -> None:
    catalog = Catalog(db)
    catalog.create_repo("r", "/src/r", None, None)

    def raw_dirty() -> str:
        return str(db.read("SELECT dirty FROM repos WHERE name='r'")[0]["dirty"])

    catalog.update_repo("r", dirty=["b.py", "a.py"])
    assert raw_dirty() == '["a.py", "b.py"]'  # the JSON indexes always wrote there
    assert catalog.dirty_files("r") == {"a.py", "b.py"}
    with pytest.raises(TypeError):
        catalog.update_repo("r", dirty="c.py")
    assert raw_dirty() == '["a.py", "b.py"]'

    catalog.update_repo("r", status="indexing", error="boom")
    catalog.update_repo("r", progress="walking")
    repo = catalog.get_repo("r")
    assert (repo.status, repo.error, repo.progress) == ("indexing", "boom", "walking")
    catalog.update_repo("r", error=None)  # None is a value: it clears the column
    repo = catalog.get_repo("r")
    assert (repo.status, repo.error, repo.progress) == ("indexing", None, "walking")
