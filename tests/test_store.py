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
from coderag.store import Catalog, Database, refs
from coderag.store.chain_rows import Unfinished
from coderag.store.files import IndexedFile


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
    assert catalog.indexed_file("r", "t.py") == IndexedFile("python", 3)
    assert catalog.indexed_file("r", "x.py") is None
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
    catalog.sessions.add_turns("s", "r", [("user", "q", "{}")], keep=10)
    catalog.delete_repo("r")
    for table in ("units", "files", "symbols", "calls", "imports", "file_history"):
        assert db.read(f"SELECT COUNT(*) FROM {table}")[0][0] == 0, table
    assert db.read("SELECT COUNT(*) FROM session_turns")[0][0] == 0
    assert catalog.list_repos() == []


def test_the_lease_claims_renews_beats_and_finishes(db: Database) -> None:
    catalog = Catalog(db)
    catalog.create_repo("r", "/src/r", None, None)
    now = time.time()
    assert catalog.chains.claim("r", "one", now, now + 60) == "one"
    assert catalog.chains.claim("r", "two", now, now + 60) is None  # held: a reindex is pending
    assert catalog.chains.claim("gone", "two", now, now + 60) is None
    assert catalog.chains.renew("r", "one", now + 120)
    assert not catalog.chains.renew("r", "two", now + 120)
    catalog.chains.beat("r", "one", now + 180)
    lease = db.read("SELECT lease_owner, lease_until, pending FROM chains WHERE repo='r'")[0]
    assert (lease["lease_owner"], lease["pending"]) == ("one", 1)
    assert lease["lease_until"] == pytest.approx(now + 180, abs=1e-3)  # a double, not a real
    assert not catalog.chains.finish("r", "two")
    assert catalog.chains.finish("r", "one")  # the pending reindex
    assert catalog.chains.claim("r", "two", now, now + 60) == "two"
    catalog.chains.release("r", "two")
    assert catalog.chains.claim("r", "three", now, now + 60) == "three"


def test_refs_rows_and_a_dead_chains_restarts(db: Database) -> None:
    catalog = Catalog(db)
    catalog.create_repo("r", "/src/r", None, "main")
    ref = refs.add(catalog, "r", "dev")
    assert (ref.ref_of, ref.branch, ref.status, ref.path) == ("r", "dev", "queued", "/src/r")
    assert ref.progress == "waiting for 'r' to finish indexing"
    assert catalog.is_ref_of(ref.name, "r") and not catalog.is_ref_of("r", "r")
    assert catalog.refs_never_indexed() == {ref.name: "r"}
    now = time.time()
    assert catalog.refs_waiting_on("r", now) == [ref.name]
    assert catalog.chains.claim(ref.name, "t", now, now + 60) == "t"
    assert catalog.refs_waiting_on("r", now) == []  # its chain has started
    assert catalog.refs_waiting_on("r", now + 120) == [ref.name]  # and died
    assert [r.ref_of for r in catalog.list_repos()] == [None, "r"]
    assert refs.of(catalog, "r") == [catalog.get_repo(ref.name)]

    # a ref forks its repository's complete index, never while a chain of it holds the lease
    assert not refs.fork(catalog, "r", ref.name)  # not complete yet
    assert catalog.chains.publish_complete("r", catalog.registration("r"), 0, 0, "c0ffee")
    assert catalog.chains.claim("r", "busy", now, now + 60) == "busy"
    assert not refs.fork(catalog, "r", ref.name)
    catalog.chains.release("r", "busy")
    assert refs.fork(catalog, "r", ref.name)
    assert catalog.get_repo(ref.name).commit == "c0ffee"
    assert catalog.chains.finish("r", "busy") is False  # nothing was pending

    catalog.update_repo("r", status="queued")
    catalog.chains.set_attempts("r", 2)  # healing: started again, its lease let go
    assert Unfinished("r", None, 2, None) in catalog.chains.unfinished(("queued",))
    catalog.chains.give_up("r", "died twice")
    repo = catalog.get_repo("r")
    assert (repo.status, repo.error) == ("error", "died twice")
    assert [u.name for u in catalog.chains.unfinished(("queued",))] == [ref.name]


def test_publishing_stages_and_the_vectors_mark(db: Database) -> None:
    catalog = Catalog(db)
    catalog.create_repo("r", "/src/r", None, None)
    uid = catalog.registration("r")
    catalog.update_repo("r", status="indexing", dirty=["a.py"])
    assert [r.name for r in catalog.chains.unfinished(("indexing", "queued"))] == ["r"]
    assert catalog.dirty_files("r") == {"a.py"}
    assert catalog.chains.publish_keywords("r", uid, 2, 5, {"vector": {"done": 0, "total": 5}})
    assert not catalog.chains.publish_keywords("r", "stale", 2, 5, {})
    catalog.chains.advance("r", "vector", 3, 5)
    repo = catalog.get_repo("r")
    assert (repo.status, repo.complete) == ("ready", False)
    assert (repo.stages["vector"].done, repo.stages["vector"].total) == (3, 5)
    assert [r.name for r in catalog.chains.unfinished(("indexing",))] == ["r"]
    catalog.chains.mark_vectors_clean("r", uid, "minilm")
    catalog.chains.open_vector_chain("r", "tok")
    assert catalog.chains.vectors_follow_chain("r", "tok", "minilm")
    assert not catalog.chains.vectors_follow_chain("r", "other", "minilm")
    catalog.chains.open_vector_chain("r", "next")  # the last chain left no clean mark
    assert not catalog.chains.vectors_follow_chain("r", "next", "minilm")
    assert catalog.chains.publish_complete("r", uid, 2, 5, "c0ffee")
    repo = catalog.get_repo("r")
    assert (repo.complete, repo.commit, catalog.published("r")[0]) == (True, "c0ffee", 2)
    assert catalog.chains.unfinished(("indexing",)) == []


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
