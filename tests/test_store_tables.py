"""The store's other tables on both backends: sessions, the audit log and its export, webhook
deliveries, the embedding cache, the call graph, clusters, statistics and the symbol table."""

from __future__ import annotations

import time

import pytest

from coderag import audit
from coderag.store import Catalog, Database, embed_cache
from coderag.store.stats import UnitStats
from coderag.store.symbols import Definition, Symbol
from tests.test_store import audit_row, indexed


def test_sessions_keep_their_owner_and_newest_turns(db: Database) -> None:
    assert Catalog(db).sessions.owner("s1", "alice") == "alice"
    assert Catalog(db).sessions.owner("s1", "bob") == "alice"
    for i in range(4):
        Catalog(db).sessions.add_turns(
            "s1", "r", [("user", f"q{i}", "{}"), ("assistant", f"a{i}", '{"k": 1}')], keep=5
        )
    Catalog(db).sessions.add_turns("s1", "other", [("user", "elsewhere", "{}")], keep=5)
    turns = Catalog(db).sessions.last_turns("s1", "r", 10)
    assert [t.content for t in turns] == ["a3", "q3", "a2", "q2", "a1"]
    assert turns[0].meta == '{"k": 1}' and turns[0].ts.endswith("Z")
    assert [t.content for t in Catalog(db).sessions.last_turns("s1", "r", 2)] == ["a3", "q3"]


def test_the_audit_log_writes_the_user_column_and_exports_csv(db: Database) -> None:
    catalog = Catalog(db)
    for user in ("alice", "=bob"):
        audit_row(catalog, user)
        time.sleep(0.002)  # timestamps are milliseconds: the second row's must be later
    rows = catalog.audit_log.rows(("id", "ts", "user", "response_ms"), None, None)
    assert [(r["user"], r["response_ms"]) for r in rows] == [("alice", 1.23), ("=bob", 1.23)]
    first, second = rows[0]["ts"], rows[1]["ts"]
    assert len(first) == len("2026-01-01T00:00:00.000Z") and first <= second
    assert [r["user"] for r in catalog.audit_log.rows(("user",), second, None)] == ["=bob"]
    assert catalog.audit_log.rows(("user",), None, first) == []
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
        Catalog(db).deliveries.record_then(*args, fail)
    assert Catalog(db).deliveries.record_then(*args, run) == "done"
    assert Catalog(db).deliveries.record_then(*args, run) is None
    assert Catalog(db).deliveries.record_then("gitlab", "d1", *args[2:], run) == "done"
    assert Catalog(db).deliveries.record_then("github", None, *args[2:], run) == "done"
    # a day later the id is forgotten and may run again
    later = ("github", "d1", "2026-01-03T00:00:01Z", "2026-01-02T00:00:01Z")
    assert Catalog(db).deliveries.record_then(*later, run) == "done"


def test_the_embedding_cache_round_trips_binary_vectors(db: Database) -> None:
    every_byte = bytes(range(256)) * 3
    Catalog(db).embed_cache.store("m", {"h1": every_byte, "h2": b"\x00\x00"})
    Catalog(db).embed_cache.store("m", {"h2": b"\x00\x01"})
    Catalog(db).embed_cache.store("other", {"h1": b"x"})
    Catalog(db).embed_cache.store("m", {})
    found = Catalog(db).embed_cache.lookup("m", ["h1", "h2", "h3", "h1"])
    assert found == {"h1": every_byte, "h2": b"\x00\x01"}
    assert all(type(v) is bytes for v in found.values())
    many = {f"k{i}": i.to_bytes(4, "little") for i in range(embed_cache.CHUNK + 7)}
    Catalog(db).embed_cache.store("big", many)
    assert Catalog(db).embed_cache.lookup("big", many) == many


def test_the_call_graph_resolves_callers_callees_and_tests(db: Database) -> None:
    _, (a, b, t) = indexed(db)
    graph = Catalog(db).graph()
    assert [(e.caller, e.callee, e.name) for e in graph.callees("r", a.id)] == [(a.id, b.id, "b")]
    assert [e.caller for e in graph.callers("r", a.id)] == [t.id]
    assert graph.neighbourhood("r", [b.id]) == {b.id: 0, a.id: 1, t.id: 2}
    assert graph.tested("r") == {a.id}
    assert graph.unit_references("r", [a.id, b.id, t.id]) == {a.id: 1, b.id: 1}
    assert graph.file_references("r") == {"a.py": 2}


def test_clusters_and_statistics(db: Database) -> None:
    catalog, (a, b, t) = indexed(db)
    catalog.clusters.replace("r", [(a.id, 0), (b.id, 1)], 0.5)
    catalog.clusters.replace("r", [(a.id, 1), (t.id, 1)], 0.25)
    assert catalog.clusters.labels("r") == {a.id: 1, t.id: 1}
    assert catalog.clusters.clustered("r") == {a.id, t.id}
    assert db.read("SELECT silhouette FROM repos WHERE name='r'")[0][0] == 0.25
    assert catalog.stats.unit_stats("r") == UnitStats(n=3, lines=3.0, chars=4.0, empty=0)
    assert type(catalog.stats.unit_stats("r").lines) is float
    assert catalog.stats.file_count("r") == 2
    assert catalog.stats.unit_stats("none") == UnitStats(n=0, lines=0.0, chars=0.0, empty=0)


def test_the_symbol_table_matches_prefixes_without_case_and_wildcards(db: Database) -> None:
    catalog, (a, b, _) = indexed(db)
    catalog.replace_files(
        "r",
        [("c.py", "python", 9, "sha-c")],
        [],
        symbols=[
            ("c.py", "Load_all", "c.Load_all", "class", 1, 9, None),
            ("c.py", "loadXall", "c.loadXall", "function", 1, 2, None),
        ],
    )
    found = catalog.symbols.starting_with("r", "load_", None, 10)
    # "_" is a character here, not LIKE's wildcard
    assert found == [Symbol("Load_all", "c.Load_all", "class", "c.py", 1, 9, None)]
    assert [r.name for r in catalog.symbols.starting_with("r", "LOAD", "function", 10)] == [
        "loadXall"
    ]
    assert len(catalog.symbols.starting_with("r", "", None, 2)) == 2
    assert {r.name for r in catalog.symbols.defined("r")} == {"a", "b", "t"}
    assert sorted(catalog.symbols.defined_in("r", "a.py"), key=lambda d: d.name) == [
        Definition(a.id, "a", "m.a"),
        Definition(b.id, "b", "m.b"),
    ]
    assert catalog.symbols.unit_of("r", "m.a") == a.id
    assert catalog.symbols.unit_of("r", "c.Load_all") is None
