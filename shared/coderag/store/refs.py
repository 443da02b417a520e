"""Refs: a repository's other branches and tags, each indexed under a key of its own.

A ref is a ``repos`` row named ``<repository>@<slug>`` (``@`` never occurs in a repository
name, so no key can collide with one) whose ``ref_of`` names its repository and whose
``branch`` is the ref. Every other table, the vector collections and the job chain treat it as
a repository, so incremental indexing, leases and healing work unchanged. Its first index is
forked from the repository's complete index: the rows are copied under the new key at the
repository's commit, and the parse then reads only the files that differ between that commit
and the ref; the vectors of the copied units come from the embedding cache, encoded once.
"""

from __future__ import annotations

import hashlib
import re
import time

from coderag.errors import Conflict, NotFound
from coderag.schemas import unit_id
from coderag.store import chain_rows, repos
from coderag.store.catalog import Catalog
from coderag.store.database import Tx, insert_sql
from coderag.store.repos import Repo
from coderag.store.tables import FILE_TABLES

SEPARATOR = "@"
"""Between a repository's name and its ref's slug in the ref's key."""

UNIT_ID_COLUMNS = {"units": "id", "symbols": "unit_id", "calls": "caller_id"}
"""The column of each file table that holds a unit's id, which names its repository, so a fork
gives it the ref's id; the other file tables are forked row for row (only ``repo`` changes)."""


def ref_key(name: str, ref: str) -> str:
    """The key a ref of repository ``name`` is indexed under: readable, path- and
    collection-safe, and distinct for distinct refs (a hash of the ref ends it)."""
    slug = re.sub(r"[^A-Za-z0-9._-]", "_", ref)[:40]
    return f"{name}{SEPARATOR}{slug}-{hashlib.sha1(ref.encode()).hexdigest()[:8]}"


def is_ref_key(key: str) -> bool:
    """Whether ``key`` names a ref rather than a repository."""
    return SEPARATOR in key


def add(catalog: Catalog, name: str, ref: str) -> Repo:
    """Register ``ref`` of repository ``name`` as queued under a fresh registration id;
    Conflict when it is the repository's own branch or already registered."""
    repo = catalog.get_repo(name)
    if repo.branch == ref:
        raise Conflict(f"{ref!r} is the branch repository {name!r} indexes; search it without ref")
    key = ref_key(name, ref)
    progress = f"waiting for {name!r} to finish indexing" if indexing(repo) else None

    def insert(conn: Tx) -> None:
        if repos.exists(conn, key):
            raise Conflict(f"ref {ref!r} of {name!r} is already registered")
        repos.insert_row(conn, key, repo.path, repo.url, ref, ref_of=name, progress=progress)

    catalog.db.write(insert)
    return catalog.get_repo(key)


def of(catalog: Catalog, name: str) -> list[Repo]:
    """The refs registered for repository ``name``, by ref."""
    return catalog.list_repos(ref_of=name)


def indexing(repo: Repo) -> bool:
    """Whether a repository's index is still being written (queued, parsing or owing vectors)."""
    return repo.status in ("queued", "indexing") or (repo.status == "ready" and not repo.complete)


def waiting_on(catalog: Catalog, name: str) -> list[str]:
    """Keys of repository ``name``'s refs never indexed and not started: they wait for its
    index to complete, to fork from it."""
    return catalog.refs_waiting_on(name, time.time())


def waiting(catalog: Catalog) -> set[str]:
    """Keys of every ref waiting for its repository's index (healing must not start them)."""
    out = set()
    for key, parent in catalog.refs_never_indexed().items():
        try:
            if indexing(catalog.get_repo(parent)):
                out.add(key)
        except NotFound:
            continue
    return out


def resolve(catalog: Catalog, name: str, ref: str | None) -> str:
    """The key to search for ``ref`` of repository ``name``: the repository itself for no ref
    or its own branch; NotFound for an unknown repository or ref."""
    repo = catalog.get_repo(name)
    if ref is None or ref == repo.branch:
        return name
    key = ref_key(name, ref)
    if not catalog.is_ref_of(key, name):
        raise _no_ref(name, ref)
    return key


def resolve_repo(catalog: Catalog, name: str, ref: str | None) -> Repo:
    """The row searched for ``ref`` of repository ``name``, read once for the whole request (the
    repository's own for no ref or its own branch); NotFound for an unknown repository or ref."""
    repo = catalog.get_repo(name)
    if ref is None or ref == repo.branch:
        return repo
    try:
        found = catalog.get_repo(ref_key(name, ref))
    except NotFound:
        raise _no_ref(name, ref) from None
    if found.ref_of != name:
        raise _no_ref(name, ref)
    return found


def _no_ref(name: str, ref: str) -> NotFound:
    return NotFound(f"repository {name!r} has no ref {ref!r}; POST /repos/{name}/refs to index it")


def label(name: str, ref: str | None) -> str:
    """How the audit log names what was searched: the repository, ``@ref`` when one was given."""
    return f"{name}{SEPARATOR}{ref}" if ref else name


def grouped(rows: list[Repo]) -> list[tuple[Repo, list[Repo]]]:
    """The repositories among ``rows`` (every row, refs included, as one read gives them), each
    with its refs by ref."""
    children: dict[str, list[Repo]] = {}
    for r in rows:
        if r.ref_of:
            children.setdefault(r.ref_of, []).append(r)
    return [(r, sorted(children.get(r.name, []), key=_by_ref)) for r in rows if not r.ref_of]


def _by_ref(repo: Repo) -> str:
    return repo.branch or ""


def fork(catalog: Catalog, parent: str, key: str) -> bool:
    """Copy repository ``parent``'s index under ``key`` at the parent's commit, when the parent
    is complete, no chain is writing it and ``key`` holds nothing yet; returns whether it
    copied. One transaction: a chain of the parent must take its lease first, so the rows are
    exactly those of the commit recorded."""

    def copy(conn: Tx) -> bool:
        source = repos.fork_source(conn, parent)
        if source is None or not source.complete or not source.commit:
            return False
        if chain_rows.held(conn, parent, time.time()):
            return False
        if conn.execute("SELECT 1 FROM files WHERE repo=:key LIMIT 1", {"key": key}).fetchone():
            return False
        ids = {
            r["id"]: unit_id(key, r["file"], r["start_line"], r["end_line"], r["symbol"])
            for r in conn.execute(
                "SELECT id, file, start_line, end_line, symbol FROM units WHERE repo=:parent",
                {"parent": parent},
            )
        }
        for table in FILE_TABLES:
            column = UNIT_ID_COLUMNS.get(table)
            _copy_rows(conn, table, parent, key, {column: ids} if column else {})
        repos.set_forked(conn, key, source.commit, source.dirty)
        return True

    return bool(catalog.db.write(copy))


def _copy_rows(
    conn: Tx,
    table: str,
    parent: str,
    key: str,
    mapped: dict[str, dict[str, str]],
) -> None:
    """Insert ``table``'s rows of ``parent`` again under ``key``, the ``mapped`` columns'
    values translated (ids the translation lacks are kept)."""
    rows = conn.execute(f"SELECT * FROM {table} WHERE repo=:parent", {"parent": parent}).fetchall()
    if not rows:
        return
    cols = list(rows[0].keys())
    out = []
    for r in rows:
        values = {c: r[c] for c in cols} | {"repo": key}
        for col, ids in mapped.items():
            values[col] = ids.get(values[col], values[col])
        out.append(values)
    conn.executemany(insert_sql(table, cols), out)
