"""The store's other tables on both backends: sessions, the audit log and its export, webhook
deliveries, the embedding cache, the call graph, clusters, statistics and the symbol table."""

from __future__ import annotations

import pytest

from coderag import audit
from coderag.store import Catalog, Database, audit_log, clusters, deliveries, embed_cache, stats
from coderag.store import sessions as session_store
from coderag.store import symbols as symbol_table
from coderag.store.graph import Graph
from tests.test_store import audit_row, indexed


def test_sessions_keep_their_owner_and_newest_turns(db: Database) -> None:
    assert session_store.owner(db, "s1", "alice") == "alice"
    assert session_store.owner(db, "s1", "bob") == "alice"
    for i in range(4):
        session_store.add_turns(
            db, "s1", "r", [("user", f"q{i}", "{}"), ("assistant", f"a{i}", '{"k": 1}')], keep=5
        )
    session_store.add_turns(db, "s1", "other", [("user", "elsewhere", "{}")], keep=5)
    turns = session_store.last_turns(db, "s1", "r", 10)
    assert [t["content"] for t in turns] == ["a3", "q3", "a2", "q2", "a1"]
    assert turns[0]["meta"] == '{"k": 1}' and turns[0]["ts"].endswith("Z")
    assert [t["content"] for t in session_store.last_turns(db, "s1", "r", 2)] == ["a3", "q3"]


def test_the_audit_log_writes_the_user_column_and_exports_csv(db: Database) -> None:
    catalog = Catalog(db)
    for user in ("alice", "=bob"):
        audit_row(catalog, user)
    rows = audit_log.rows(db, ("id", "ts", "user", "response_ms"), None, None)
    assert [(r["user"], r["response_ms"]) for r in rows] == [("alice", 1.23), ("=bob", 1.23)]
    first, second = rows[0]["ts"], rows[1]["ts"]
    assert len(first) == len("2026-01-01T00:00:00.000Z") and first <= second
    assert [r["user"] for r in audit_log.rows(db, ("user",), second, None)] == ["=bob"]
    assert audit_log.rows(db, ("user",), None, first) == []
    lines = list(audit.export_csv(catalog, None, None))
    assert lines[0].startswith("id,ts,user,endpoint")
    assert ",'=bob,/search," in lines[2]


def test_a_webhook_delivery_runs_once_and_is_forgotten_when_its_action_fails(
    db: Database,
) -> None:
    def run() -> str:
        return "done"

    def fail() -> str:
        raise RuntimeError("queue down")

    args = ("github", "d1", "2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z")
    with pytest.raises(RuntimeError):
        deliveries.record_then(db, *args, fail)
    assert deliveries.record_then(db, *args, run) == "done"
    assert deliveries.record_then(db, *args, run) is None
    assert deliveries.record_then(db, "gitlab", "d1", *args[2:], run) == "done"
    assert deliveries.record_then(db, "github", None, *args[2:], run) == "done"
    # a day later the id is forgotten and may run again
    later = ("github", "d1", "2026-01-03T00:00:01Z", "2026-01-02T00:00:01Z")
    assert deliveries.record_then(db, *later, run) == "done"


def test_the_embedding_cache_round_trips_binary_vectors(db: Database) -> None:
    every_byte = bytes(range(256)) * 3
    embed_cache.store(db, "m", {"h1": every_byte, "h2": b"\x00\x00"})
    embed_cache.store(db, "m", {"h2": b"\x00\x01"})
    embed_cache.store(db, "other", {"h1": b"x"})
    embed_cache.store(db, "m", {})
    found = embed_cache.lookup(db, "m", ["h1", "h2", "h3", "h1"])
    assert found == {"h1": every_byte, "h2": b"\x00\x01"}
    assert all(type(v) is bytes for v in found.values())
    many = {f"k{i}": i.to_bytes(4, "little") for i in range(embed_cache.CHUNK + 7)}
    embed_cache.store(db, "big", many)
    assert embed_cache.lookup(db, "big", many) == many


def test_the_call_graph_resolves_callers_callees_and_tests(db: Database) -> None:
    _, (a, b, t) = indexed(db)
    graph = Graph(db)
    assert [(e.caller, e.callee, e.name) for e in graph.callees("r", a.id)] == [(a.id, b.id, "b")]
    assert [e.caller for e in graph.callers("r", a.id)] == [t.id]
    assert graph.neighbourhood("r", [b.id]) == {b.id: 0, a.id: 1, t.id: 2}
    assert graph.tested("r") == {a.id}
    assert graph.symbol_references("r") == {"a": 1, "b": 1}
    assert graph.file_references("r") == {"a.py": 2}


def test_clusters_and_statistics(db: Database) -> None:
    _, (a, b, t) = indexed(db)
    clusters.replace(db, "r", [(a.id, 0), (b.id, 1)], 0.5)
    clusters.replace(db, "r", [(a.id, 1), (t.id, 1)], 0.25)
    assert clusters.labels(db, "r") == {a.id: 1, t.id: 1}
    assert clusters.clustered(db, "r") == {a.id, t.id}
    assert db.read("SELECT silhouette FROM repos WHERE name='r'")[0][0] == 0.25
    row = stats.unit_stats(db, "r")
    assert (row["n"], row["lines"], row["chars"], row["empty"]) == (3, 3.0, 4.0, 0)
    assert type(row["lines"]) is float
    assert stats.file_count(db, "r") == 2
    empty = stats.unit_stats(db, "none")
    assert (empty["n"], empty["lines"], empty["empty"]) == (0, 0.0, 0)


def test_the_symbol_table_matches_prefixes_without_case_and_wildcards(db: Database) -> None:
    catalog, (a, _, _) = indexed(db)
    catalog.replace_files(
        "r",
        [("c.py", "python", 9, "sha-c")],
        [],
        symbols=[
            ("c.py", "Load_all", "c.Load_all", "class", 1, 9, None),
            ("c.py", "loadXall", "c.loadXall", "function", 1, 2, None),
        ],
    )
    names = [r["name"] for r in symbol_table.starting_with(db, "r", "load_", None, 10)]
    assert names == ["Load_all"]  # "_" is a character here, not LIKE's wildcard
    assert [r["name"] for r in symbol_table.starting_with(db, "r", "LOAD", "function", 10)] == [
        "loadXall"
    ]
    assert len(symbol_table.starting_with(db, "r", "", None, 2)) == 2
    assert {r["name"] for r in symbol_table.defined(db, "r")} == {"a", "b", "t"}
    assert sorted(r["qualified"] for r in symbol_table.defined_in(db, "r", "a.py")) == [
        "m.a",
        "m.b",
    ]
    assert symbol_table.unit_of(db, "r", "m.a") == a.id
    assert symbol_table.unit_of(db, "r", "c.Load_all") is None
