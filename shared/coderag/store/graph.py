"""The call and import graphs, resolved at read time from the parser's raw rows.

Call sites are stored by callee *name* (plus the receiver's type when the parser could infer it),
so an edit in one file never leaves stale resolved edges in another: resolution happens here,
against the symbol table as it is now.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coderag.index_rows import BINDING_KIND
from coderag.store.database import Database, Row, Tx, insert_sql

CALLABLE_KINDS = ("function", "method")
"""Symbol kinds a call can resolve to."""

MAX_CANDIDATES = 3
"""A bare name with more definitions than this is too ambiguous to link."""

NAMES_PER_QUERY = 400
"""Names looked up in one query (SQLite allows 999 parameters in older builds)."""


@dataclass(frozen=True)
class Edge:
    """One resolved call: caller unit -> callee unit."""

    caller: str
    callee: str
    name: str
    line: int


SELF_RECEIVERS = frozenset({"self", "this", "cls"})
"""Receivers that name the caller's own object: its type is the caller's class."""

ATTRIBUTES_OF_SELF = ("self.", "this.", "cls.")
"""Receivers that are objects the caller's own object holds."""

DECLARATION_FILES = (".d.ts", ".d.mts", ".d.cts")
"""TypeScript declaration files: what they define only declares code implemented elsewhere."""

SUPER_RECEIVERS = ("super(", "super.")
"""Receivers that name the parent class (Python's ``super()``; with ``super`` itself, Java's
and JavaScript's)."""


def _type_name(receiver_type: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "", receiver_type.split(".")[-1])


def _owner(qualified: str) -> str:
    """The type a qualified method name belongs to (``Router`` of ``Router.app``, ``Command``
    of ``(*Command).AddCommand``; empty for a function)."""
    head, dot, _ = qualified.rpartition(".")
    return _type_name(head) if dot else ""


class Graph:
    """Callers, callees, reference counts and test coverage of one repository's units.

    A graph remembers the edges and definitions it has read: make one per request or job, so a
    search that walks the same seeds twice (expansion, then the ranker's adjacency) reads each
    once, and no answer reads edges older than its request."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._named: dict[tuple[str, str], list[Row]] = {}
        self._edges: dict[tuple[str, str, str], list[Edge]] = {}
        self._imported: dict[tuple[str, str], list[str]] = {}

    def _definitions(self, repo: str, names: set[str]) -> dict[str, list[Row]]:
        """Callable definitions of each name (qualified, kind, file, unit_id rows), read in one
        query for the names not read before."""
        todo = sorted(n for n in names if (repo, n) not in self._named)
        for i in range(0, len(todo), NAMES_PER_QUERY):
            part = todo[i : i + NAMES_PER_QUERY]
            found: dict[str, list[Row]] = {n: [] for n in part}
            for r in self._db.read(
                "SELECT name, qualified, kind, file, unit_id FROM symbols WHERE repo=:repo "
                "AND name IN :names AND kind IN :kinds AND unit_id IS NOT NULL",
                {"repo": repo, "names": part, "kinds": CALLABLE_KINDS},
            ):
                found[r["name"]].append(r)
            self._named.update({(repo, n): rows for n, rows in found.items()})
        for key, rows in self._bound(repo, [n for n in todo if n.startswith("[")]).items():
            self._named[(repo, key)] = self._named[(repo, key)] + rows
        return {n: self._named[(repo, n)] for n in names}

    def _bound(self, repo: str, keys: list[str]) -> dict[str, list[Row]]:
        """The functions stored under computed keys by a file that imports them (pino's
        ``{ [asJsonSym]: asJson }`` with ``asJson`` from tools.js): each binding's function
        found as a bare call from the binding's file would find it, named by the key as a
        method of the object it is stored in (a function the same file defines is named by the
        parser itself)."""
        if not keys:
            return {}
        bindings = self._db.read(
            "SELECT name, qualified, file FROM symbols WHERE repo=:repo AND name IN :names "
            "AND kind = :kind",
            {"repo": repo, "names": keys, "kind": BINDING_KIND},
        )
        targets = self._definitions(repo, {b["qualified"] for b in bindings})
        out: dict[str, list[Row]] = defaultdict(list)
        for b in bindings:
            rows = targets[b["qualified"]]
            for uid in self._pick(repo, rows, "", b["file"]):
                row = next(r for r in rows if r["unit_id"] == uid)
                fields = {**dict(zip(row.keys(), row, strict=True)), "name": b["name"]}
                fields["kind"] = "method"
                out[b["name"]].append(type(row)(tuple(fields.values())))
        return out

    def _imports(self, repo: str, file: str) -> list[str]:
        """The modules one file imports, read once per graph."""
        key = (repo, file)
        if key not in self._imported:
            self._imported[key] = [
                r["module"]
                for r in self._db.read(
                    "SELECT module FROM imports WHERE repo=:repo AND file=:file",
                    {"repo": repo, "file": file},
                )
            ]
        return self._imported[key]

    def _visible(self, repo: str, file: str, defined: str) -> bool:
        """Whether code in ``file`` can name what ``defined`` defines without a type to go by:
        the same folder (a Go or Java package, a Python package's siblings), a module the file
        imports, or a module of a package it imports."""
        folder = defined.rpartition("/")[0]
        if folder == file.rpartition("/")[0]:
            return True
        for module in self._imports(repo, file):
            # a package's import sees its modules through the package's re-exports
            package = module.strip("./").replace(".", "/")
            if _imports_file(module, defined) or (
                package and (folder == package or folder.endswith("/" + package))
            ):
                return True
        return False

    def _pick(
        self, repo: str, rows: list[Row], receiver_type: str, file: str, receiver: str = ""
    ) -> list[str]:
        """The units a call site resolves to among a name's definitions: those of the
        receiver's type, else those in the caller's file, else, for a receiver of unknown type,
        those the caller's file can see (its folder, its imports), else all when few enough.
        A call on ``self`` or ``this`` whose class defines no such method resolves to nothing:
        it calls an attribute or an inherited method, never another class's method of the same
        name (issue 43: ``Mount.handle``'s ``self.app()`` was said to call ``Router.app``). A
        call with no receiver resolves to functions and to methods of its own file only; a call
        on an attribute of ``self`` (``self.lifespan.shutdown()``) to no method of its own
        file."""
        if not receiver:
            # a bare call names a function, or (implicit this) a method of its own class, whose
            # file it shares: never another file's method (issue 43's second trial:
            # ``__main__.py``'s ``main()`` was said to call ``LifespanOn.main``)
            rows = [r for r in rows if r["kind"] != "method" or r["file"] == file]
        elif receiver == "super" or receiver.startswith(SUPER_RECEIVERS):
            # the parent class's method, which the call site cannot name: no edge rather than
            # every ``__init__`` (issue 43's third trial)
            return []
        else:
            if receiver.startswith(ATTRIBUTES_OF_SELF) and not receiver_type:
                # another object held by this one: ``Server.startup``'s
                # ``self.lifespan.shutdown()`` was said to call ``Server.shutdown``
                rows = [r for r in rows if r["kind"] != "method" or r["file"] != file]
            # a function called through a receiver is one of the module the receiver names
            # (``typer.run``), never a like-named function elsewhere (``subprocess.run()`` was
            # said to call ``typer.main.run``: issue 43's third trial)
            rows = [r for r in rows if r["kind"] != "function" or _names_module(receiver, r)]
        # a declaration is no callee where the code it declares is a candidate too: pino's
        # `pino(...)` calls pino.js's function, not pino.d.ts's (issue 43's fourth trial)
        implemented = [r for r in rows if not r["file"].endswith(DECLARATION_FILES)]
        rows = implemented or rows
        if not rows:
            return []
        if receiver_type:
            owner = _type_name(receiver_type)
            typed = [r for r in rows if _owner(r["qualified"]) == owner]
            if typed:
                return [r["unit_id"] for r in typed]
            if receiver in SELF_RECEIVERS:
                return []
        local = [r for r in rows if r["file"] == file]
        if local:
            return [r["unit_id"] for r in local]
        if receiver and not receiver_type:
            # a method on an object of unknown type: only one the caller's file can see
            # (``thread.start()`` was said to call ``Process.start`` from files that never
            # import it)
            rows = [r for r in rows if self._visible(repo, file, r["file"])]
        return [r["unit_id"] for r in rows] if len(rows) <= MAX_CANDIDATES else []

    def callees(self, repo: str, unit_id: str) -> list[Edge]:
        """Units the given unit calls."""
        key = (repo, unit_id, "callees")
        if key not in self._edges:
            sites = self._db.read(
                "SELECT file, callee, receiver, receiver_type, line FROM calls "
                "WHERE caller_id=:unit",
                {"unit": unit_id},
            )
            definitions = self._definitions(repo, {r["callee"] for r in sites})
            self._edges[key] = [
                Edge(unit_id, target, r["callee"], r["line"])
                for r in sites
                for target in self._pick(
                    repo, definitions[r["callee"]], r["receiver_type"], r["file"], r["receiver"]
                )
                if target != unit_id
            ]
        return self._edges[key]

    def callers(self, repo: str, unit_id: str) -> list[Edge]:
        """Units that call the given unit."""
        key = (repo, unit_id, "callers")
        if key not in self._edges:
            names = {
                r["name"]
                for r in self._db.read(
                    "SELECT name FROM symbols WHERE repo=:repo AND unit_id=:unit",
                    {"repo": repo, "unit": unit_id},
                )
            }
            if names:
                # the keys other files store the unit's function under (``[asJsonSym]``)
                names |= {
                    r["name"]
                    for r in self._db.read(
                        "SELECT name FROM symbols WHERE repo=:repo AND kind=:kind "
                        "AND qualified IN :names",
                        {"repo": repo, "kind": BINDING_KIND, "names": sorted(names)},
                    )
                }
            definitions = self._definitions(repo, names)
            out: list[Edge] = []
            for name in sorted(names):
                for r in self._db.read(
                    "SELECT caller_id, file, receiver, receiver_type, line FROM calls "
                    "WHERE repo=:repo AND callee=:name",
                    {"repo": repo, "name": name},
                ):
                    if r["caller_id"] != unit_id and unit_id in self._pick(
                        repo, definitions[name], r["receiver_type"], r["file"], r["receiver"]
                    ):
                        out.append(Edge(r["caller_id"], unit_id, name, r["line"]))
            self._edges[key] = out
        return self._edges[key]

    def neighbourhood(self, repo: str, unit_ids: list[str], depth: int = 2) -> dict[str, int]:
        """Units within ``depth`` calls of the given ones (either direction) -> distance."""
        seen = {u: 0 for u in unit_ids}
        frontier = list(unit_ids)
        for d in range(1, depth + 1):
            nxt = []
            for u in frontier:
                for e in self.callees(repo, u) + self.callers(repo, u):
                    other = e.callee if e.caller == u else e.caller
                    if other not in seen:
                        seen[other] = d
                        nxt.append(other)
            frontier = nxt
        return seen

    def unit_references(self, repo: str, unit_ids: Iterable[str]) -> Counter[str]:
        """Call sites that resolve to each of the given units, by the same rules as ``callers``
        and ``tested`` (issue 43: five ``url_path_for`` methods each reported every call of the
        name). A site that may mean several units counts for each of them."""
        wanted = set(unit_ids)
        if not wanted:
            return Counter()
        units = sorted(wanted)
        names: set[str] = set()
        for i in range(0, len(units), NAMES_PER_QUERY):
            names.update(
                r["name"]
                for r in self._db.read(
                    "SELECT name FROM symbols WHERE repo=:repo AND unit_id IN :units",
                    {"repo": repo, "units": units[i : i + NAMES_PER_QUERY]},
                )
            )
        listed = sorted(names)
        sites: list[Row] = []
        for i in range(0, len(listed), NAMES_PER_QUERY):
            sites += self._db.read(
                "SELECT caller_id, callee, receiver, receiver_type, file FROM calls "
                "WHERE repo=:repo AND callee IN :names",
                {"repo": repo, "names": listed[i : i + NAMES_PER_QUERY]},
            )
        counts: Counter[str] = Counter()
        for site, picked in self._resolve(repo, sites):
            counts.update(u for u in picked if u in wanted and u != site["caller_id"])
        return counts

    def file_references(self, repo: str) -> Counter[str]:
        """Per file: call sites in other files naming its symbols, plus imports of its module."""
        defined: dict[str, set[str]] = defaultdict(set)
        by_repo = {"repo": repo}
        for r in self._db.read("SELECT name, file FROM symbols WHERE repo=:repo", by_repo):
            defined[r["name"]].add(r["file"])
        counts: Counter[str] = Counter()
        for r in self._db.read("SELECT callee, file FROM calls WHERE repo=:repo", by_repo):
            for f in defined.get(r["callee"], ()):
                if f != r["file"]:
                    counts[f] += 1
        files = [
            r["path"] for r in self._db.read("SELECT path FROM files WHERE repo=:repo", by_repo)
        ]
        for r in self._db.read("SELECT file, module FROM imports WHERE repo=:repo", by_repo):
            for f in files:
                if f != r["file"] and _imports_file(r["module"], f):
                    counts[f] += 1
        return counts

    def tested(self, repo: str) -> set[str]:
        """Units called from test code (TestCoverageHint). A name the tests call that several
        definitions share (``url_path_for`` on five classes) counts for those of the modules
        the test file imports, when the receiver's type does not say which (issue 43: none of
        them was tested before, although the tests call them constantly)."""
        sites = self._db.read(
            "SELECT c.callee, c.receiver, c.receiver_type, c.file FROM calls c JOIN units u "
            "ON u.id = c.caller_id WHERE c.repo=:repo AND u.is_test=1",
            {"repo": repo},
        )
        return {u for _, picked in self._resolve(repo, sites) for u in picked}

    def _resolve(self, repo: str, sites: list[Row]) -> list[tuple[Row, list[str]]]:
        """Each call site with the units it resolves to: ``_pick``'s rules, then, for a name
        too common to pick by and no receiver type, the definitions in modules the calling
        file imports."""
        definitions = self._definitions(repo, {r["callee"] for r in sites})
        out: list[tuple[Row, list[str]]] = []
        for r in sites:
            rows = definitions[r["callee"]]
            picked = self._pick(repo, rows, r["receiver_type"], r["file"], r["receiver"])
            if not picked and len(rows) > MAX_CANDIDATES and not r["receiver_type"]:
                modules = self._imports(repo, r["file"])
                picked = [
                    d["unit_id"] for d in rows if any(_imports_file(m, d["file"]) for m in modules)
                ]
            out.append((r, picked))
        return out


CALL_FIELDS = ("repo", "file", "caller_id", "callee", "receiver", "receiver_type", "line")
"""Columns of a call row."""

IMPORT_FIELDS = ("repo", "file", "module")
"""Columns of an import row."""


def insert(
    conn: Tx, repo: str, calls: Iterable[tuple[Any, ...]], imports: Iterable[tuple[Any, ...]]
) -> None:
    """Add a parse's raw graph rows: calls (file, caller_id, callee, receiver, receiver_type,
    line) and imports (file, module)."""
    for table, fields, rows in (("calls", CALL_FIELDS, calls), ("imports", IMPORT_FIELDS, imports)):
        conn.executemany(
            insert_sql(table, fields), [dict(zip(fields, (repo, *r), strict=True)) for r in rows]
        )


def _names_module(receiver: str, definition: Row) -> bool:
    """Whether a call's receiver names the module (file stem or a folder of it) that defines a
    function: ``typer.run`` and ``main.run`` name ``typer/main.py``'s ``run``."""
    last = re.split(r"[.:]+", receiver.strip("().:"))[-1]
    parts = definition["file"].split("/")
    stem = parts[-1].rsplit(".", 1)[0]
    return bool(last) and (last == stem or last in parts[:-1])


def _imports_file(module: str, path: str) -> bool:
    """Whether an import names this file's module (Python dotted, Go/JS paths, C headers)."""
    stem = re.sub(r"\.[A-Za-z0-9]+$", "", path)
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    module = module.strip("./")
    if not module:
        return False
    dotted = module.replace(".", "/")
    return (
        stem.endswith("/" + dotted)
        or stem == dotted
        or path == module
        or path.endswith("/" + module)
        or (path.rsplit("/", 1)[0].endswith(module) and "/" in module)
    )
