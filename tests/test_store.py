"""The store's catalog and chain rows on both backends: a SQLite file and a real PostgreSQL
database (the ``db`` fixture runs each test once per backend)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from coderag import audit
from coderag.errors import Conflict, NotFound
from coderag.schemas import Unit
from coderag.store import Catalog, Database, chain_rows
from coderag.store import sessions as session_store


def unit(file: str, start: int, symbol: str, text: str = "pass", is_test: bool = False) -> Unit:
    """A small unit of repository ``r``."""
    return Unit(
        repo="r",
        file=file,
        start_line=start,
        end_line=start + 2,
        symbol=symbol,
        kind="function",
        language="python",
        text=text,
        is_test=is_test,
        facts={"calls": ["b"], "名": "ü"},
    )


def audit_row(catalog: Catalog, user: str, query: str = "q", endpoint: str = "/search") -> None:
    """Record one audit row as a call would."""
    audit.record(
        catalog,
        user=user,
        endpoint=endpoint,
        repo="r",
        query=query,
        files=["a.py"],
        input_tokens=len(query),
        response_ms=1.234,
        status="ok",
    )


def indexed(db: Database) -> tuple[Catalog, list[Unit]]:
    """Repository ``r`` with two files, three units, symbols, calls and imports."""
    catalog = Catalog(db)
    catalog.create_repo("r", "/src/r", None, "main")
    units = [unit("a.py", 1, "a"), unit("a.py", 10, "b"), unit("t.py", 1, "t", is_test=True)]
    catalog.replace_files(
        "r",
        [("a.py", "python", 12, "sha-a"), ("t.py", "python", 3, "sha-t")],
        units,
        symbols=[
            ("a.py", "a", "m.a", "function", 1, 3, units[0].id),
            ("a.py", "b", "m.b", "function", 10, 12, units[1].id),
            ("t.py", "t", "t.t", "function", 1, 3, units[2].id),
        ],
        calls=[("a.py", units[0].id, "b", "", "", 2), ("t.py", units[2].id, "a", "", "", 2)],
        imports=[("t.py", "a")],
        blamed=False,
    )
    return catalog, units


def test_repositories_register_update_and_list_in_code_point_order(db: Database) -> None:
    catalog = Catalog(db)
    for name in ("b", "B", "a_1"):
        catalog.create_repo(name, f"/src/{name}", None, None)
    with pytest.raises(Conflict):
        catalog.create_repo("b", None, "https://x", None)
    assert [r.name for r in catalog.list_repos()] == ["B", "a_1", "b"]
    uid = catalog.registration("b")
    assert len(uid) == 32
    catalog.update_repo("b", registration=uid, status="ready", files=7, progress="x")
    repo = catalog.get_repo("b")
    assert (repo.status, repo.files, repo.progress, repo.complete) == ("ready", 7, "x", True)
    with pytest.raises(NotFound):
        catalog.update_repo("b", registration="other", status="failed")
    with pytest.raises(NotFound):
        catalog.get_repo("nope")
    assert catalog.published("b") == (0, uid)
    assert catalog.published("nope") == (-1, "")


def test_files_units_symbols_calls_replace_blame_and_remove(db: Database) -> None:
    catalog, units = indexed(db)
    assert catalog.file_shas("r") == {"a.py": "sha-a", "t.py": "sha-t"}
    assert catalog.file_versions("r")["a.py"] == "sha-a:unblamed"
    assert catalog.unblamed_files("r") == ["a.py", "t.py"]
    assert catalog.counts("r") == (2, 3)
    assert catalog.file_lines("r", "a.py") == 12 and catalog.file_lines("r", "x.py") is None
    assert tuple(catalog.file_row("r", "t.py")) == ("python", 3)
    assert catalog.units("r") == units
    assert catalog.units("r", ["t.py", "a.py"]) == [units[2], units[0], units[1]]
    assert catalog.units_by_id([units[1].id, "missing"]) == {units[1].id: units[1]}
    assert catalog.unit_ids("r") == {u.id for u in units}
    assert catalog.unit_hashes("r")[units[0].id] == units[0].content_hash

    catalog.set_blame("r", ["a.py"], [(units[0].id, "c1", "ann", "2026-01-02")])
    assert catalog.unblamed_files("r") == ["t.py"]
    assert catalog.units("r", ["a.py"])[0].last_author == "ann"

    # replacing a file replaces its units (same id, new text) and its symbols and calls
    changed = unit("a.py", 1, "a", text="return 2")
    catalog.replace_files("r", [("a.py", "python", 3, "sha-a2")], [changed])
    assert catalog.units("r", ["a.py"]) == [changed]
    rows = db.read("SELECT COUNT(*) FROM symbols WHERE repo='r' AND file='a.py'")
    assert rows[0][0] == 0
    assert catalog.remove_files("r", ["t.py"]) == [units[2].id]
    assert catalog.counts("r") == (1, 1)
    with pytest.raises(NotFound):
        catalog.replace_files("gone", [], [])
    with pytest.raises(NotFound):
        catalog.remove_files("r", ["a.py"], registration="stale")


def test_history_skipped_files_and_delete(db: Database) -> None:
    catalog, _ = indexed(db)
    catalog.set_history("r", {"a.py": 3, "t.py": 1})
    catalog.set_history("r", {"a.py": 4})
    assert catalog.history("r") == {"a.py": 4}
    assert catalog.set_skipped("r", {"big.bin": "binary", "x.min.js": "generated"}, None) == {
        "binary": 1,
        "generated": 1,
    }
    counts = catalog.set_skipped("r", {"big.bin": "too large"}, ["big.bin", "x.min.js"])
    assert counts == {"too large": 1}
    assert catalog.get_repo("r").skipped_by_reason == {"too large": 1}
    session_store.add_turns(db, "s", "r", [("user", "q", "{}")], keep=10)
    catalog.delete_repo("r")
    for table in ("units", "files", "symbols", "calls", "imports", "file_history"):
        assert db.read(f"SELECT COUNT(*) FROM {table}")[0][0] == 0, table
    assert db.read("SELECT COUNT(*) FROM session_turns")[0][0] == 0
    assert catalog.list_repos() == []


def test_the_lease_claims_renews_beats_and_finishes(db: Database) -> None:
    Catalog(db).create_repo("r", "/src/r", None, None)
    now = time.time()
    assert chain_rows.claim(db, "r", "one", now, now + 60) == "one"
    assert chain_rows.claim(db, "r", "two", now, now + 60) is None  # held: a reindex is pending
    assert chain_rows.claim(db, "gone", "two", now, now + 60) is None
    assert chain_rows.renew(db, "r", "one", now + 120)
    assert not chain_rows.renew(db, "r", "two", now + 120)
    chain_rows.beat(db, "r", "one", now + 180)
    lease = db.read("SELECT lease_owner, lease_until, pending FROM repos WHERE name='r'")[0]
    assert (lease["lease_owner"], lease["pending"]) == ("one", 1)
    assert lease["lease_until"] == pytest.approx(now + 180, abs=1e-3)  # a double, not a real
    assert not chain_rows.finish(db, "r", "two")
    assert chain_rows.finish(db, "r", "one")  # the pending reindex
    assert chain_rows.claim(db, "r", "two", now, now + 60) == "two"
    chain_rows.release(db, "r", "two")
    assert chain_rows.claim(db, "r", "three", now, now + 60) == "three"


def test_publishing_stages_and_the_vectors_mark(db: Database) -> None:
    catalog = Catalog(db)
    catalog.create_repo("r", "/src/r", None, None)
    uid = catalog.registration("r")
    catalog.update_repo("r", status="indexing", dirty='["a.py"]')
    assert [r["name"] for r in chain_rows.unfinished(db, ("indexing", "queued"))] == ["r"]
    assert chain_rows.dirty_files(db, "r") == {"a.py"}
    assert chain_rows.publish_keywords(db, "r", uid, 2, 5, {"vector": {"done": 0, "total": 5}})
    assert not chain_rows.publish_keywords(db, "r", "stale", 2, 5, {})
    chain_rows.advance(db, "r", "vector", 3, 5)
    repo = catalog.get_repo("r")
    assert (repo.status, repo.complete) == ("ready", False)
    assert (repo.stages["vector"].done, repo.stages["vector"].total) == (3, 5)
    assert [r["name"] for r in chain_rows.unfinished(db, ("indexing",))] == ["r"]
    chain_rows.mark_vectors_clean(db, "r", uid, "minilm")
    chain_rows.open_vector_chain(db, "r", "tok")
    assert chain_rows.vectors_follow_chain(db, "r", "tok", "minilm")
    assert not chain_rows.vectors_follow_chain(db, "r", "other", "minilm")
    chain_rows.open_vector_chain(db, "r", "next")  # the last chain left no clean mark
    assert not chain_rows.vectors_follow_chain(db, "r", "next", "minilm")
    assert chain_rows.publish_complete(db, "r", uid, 2, 5, "c0ffee")
    repo = catalog.get_repo("r")
    assert (repo.complete, repo.commit, catalog.published("r")[0]) == (True, "c0ffee", 2)
    assert chain_rows.unfinished(db, ("indexing",)) == []


def test_a_failed_write_rolls_back_and_the_next_one_runs(db: Database) -> None:
    catalog = Catalog(db)
    catalog.create_repo("r", None, "https://x", None)

    def half(conn) -> None:
        conn.execute("UPDATE repos SET files=5 WHERE name='r'")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        db.write(half)
    assert catalog.get_repo("r").files == 0
    catalog.update_repo("r", files=6)
    assert catalog.get_repo("r").files == 6


def test_a_forked_child_writes_on_connections_of_its_own(db: Database) -> None:
    """An rq work horse is a fork of a worker that has used the database: the child gets its own
    writer thread and connections, and the parent's still work afterwards."""
    catalog = Catalog(db)
    catalog.create_repo("r", None, "https://x", None)
    assert catalog.get_repo("r").files == 0  # the parent holds pooled connections now
    pid = os.fork()
    if pid == 0:  # the child: a hang or an error is its exit status
        signal.alarm(30)
        code = 1
        try:
            catalog.update_repo("r", files=9)
            code = 0 if catalog.get_repo("r").files == 9 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert catalog.get_repo("r").files == 9
    catalog.update_repo("r", files=10)
    assert catalog.get_repo("r").files == 10
