"""The ``repos`` table: a repository's (or a ref's) registration and its published index.

Every write of the table is here; the other store modules that change a repository's row
within their own transaction (a chain publishing an index or giving up, a ref's registration
and fork, skipped-file counts, the clustering's score) call the ``Tx`` functions below. What a
chain under way keeps (its lease, restarts, stage progress, vectors mark) is the ``chains``
table's (``coderag.store.chain_rows``); a repository's record reads its stage progress there.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Unpack

from coderag import auth, gitsafe
from coderag.errors import Conflict, NotFound
from coderag.eta import eta_seconds
from coderag.schemas import RepoStatus
from coderag.store.database import Database, Row, Tx
from coderag.store.repo_fields import RepoFields, encode
from coderag.store.tables import REPO_TABLES


def now_iso() -> str:
    """Current UTC time as ISO 8601 with a Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class SpaceProgress:
    """Vectors one space owes for the index in progress: ``done`` of ``total`` (None: not
    counted yet)."""

    done: int = 0
    total: int | None = None


@dataclass(frozen=True)
class Repo:
    """A repository's or ref's row: where it comes from and how far its index is."""

    name: str
    status: RepoStatus
    path: str | None = None
    url: str | None = None
    branch: str | None = None
    commit: str | None = None
    files: int = 0
    units: int = 0
    skipped: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    indexed_at: str | None = None
    error: str | None = None
    """Why the last index failed, as any reader may see it (``gitsafe.public_error``)."""
    error_detail: str | None = None
    """The whole error when ``error`` hides git's own output: for admins only."""
    progress: str | None = None
    complete: bool = False
    stages: dict[str, SpaceProgress] = field(default_factory=dict)
    eta_s: float | None = None
    searchable_at: str | None = None
    ref_of: str | None = None
    generation: int = 0
    """How many times its index was published (0 before it was ever ready)."""
    registration: str = ""
    """Its registration id ('' for one registered before ids existed)."""


SELECT_REPOS = (
    "SELECT r.*, COALESCE(c.stages, '{}') AS stages FROM repos r "
    "LEFT JOIN chains c ON c.repo = r.name"
)
"""Every column of repository rows, with their chain's stage progress."""


def repo_from_row(row: Row) -> Repo:
    """A row of ``SELECT_REPOS`` as a record; a row from before stages is complete when
    ready."""
    state: dict[str, Any] = json.loads(row["stages"] or "{}")
    raw = row["complete"]
    complete = row["status"] == "ready" if raw is None else bool(raw)
    shown = gitsafe.public_error(row["error"])
    return Repo(
        name=row["name"],
        status=row["status"],
        path=row["path"],
        url=row["url"],
        branch=row["branch"],
        commit=row["commit_sha"],
        files=row["files"],
        units=row["units"],
        skipped=row["skipped"],
        skipped_by_reason=json.loads(row["skipped_reasons"] or "{}"),
        indexed_at=row["indexed_at"],
        error=shown,
        error_detail=row["error"] if shown != row["error"] else None,
        progress=row["progress"],
        complete=complete,
        stages={}
        if complete
        else {s: SpaceProgress(e.get("done", 0), e.get("total")) for s, e in state.items()},
        eta_s=eta_seconds(state, complete),
        searchable_at=row["searchable_at"],
        ref_of=row["ref_of"],
        generation=int(row["generation"]),
        registration=row["uid"] or "",
    )


def _refuse_escaping(local: Path) -> None:
    """Raise ``gitsafe.Refused`` (403) when the repository at ``local`` escapes the allowed
    directories; a directory in no repository is indexed as plain files, so it passes."""
    try:
        gitsafe.locate(local, search_parent_directories=True)
    except gitsafe.Refused:
        raise
    except gitsafe.NotARepository:
        return


def _missing(name: str) -> NotFound:
    return NotFound(f"no repository named {name!r}; POST /repos to add it")


def readable(repo: Repo) -> bool:
    """Whether this request's caller may read ``repo`` (a ref: its repository), by the grants
    in force (``auth.reading``); every read of a repository row passes here, so one the caller
    may not read answers exactly as one that does not exist."""
    may_read = auth.reading.get()
    return may_read is None or may_read(repo.ref_of or repo.name)


class Repos:
    """Reads and writes of the ``repos`` table (a part of ``Catalog``)."""

    db: Database

    def create_repo(self, name: str, path: str | None, url: str | None, branch: str | None) -> Repo:
        """Register a repository as queued, under a fresh registration id; Conflict if the name
        is taken, Forbidden (``gitsafe.Refused``) when its directory (``path``, or a file://
        ``url``) is a repository git would read outside the allowed directories through."""
        # every registration passes here, whichever front (API, CLI) took it
        for local in (Path(path) if path else None, gitsafe.local_source(url) if url else None):
            if local is not None and local.is_dir():
                _refuse_escaping(local)

        def insert(conn: Tx) -> None:
            if exists(conn, name):
                raise Conflict(f"repository {name!r} already exists; DELETE it or pick a name")
            insert_row(conn, name, path, url, branch)

        self.db.write(insert)
        return self.get_repo(name)

    def get_repo(self, name: str) -> Repo:
        """The repository's state; NotFound if unknown."""
        rows = self.db.read(f"{SELECT_REPOS} WHERE r.name=:name", {"name": name})
        if not rows or not readable(found := repo_from_row(rows[0])):
            raise _missing(name)
        return found

    def registration(self, name: str) -> str:
        """The registration id of the repository now named ``name`` ('' for one registered before
        ids existed); NotFound if unknown. Jobs, caches and vectors are keyed by it, so nothing of
        a deleted repository reaches a new one of the same name."""
        rows = self.db.read("SELECT uid FROM repos WHERE name=:name", {"name": name})
        if not rows:
            raise _missing(name)
        return rows[0]["uid"] or ""

    def names(self) -> set[str]:
        """The names of every repository and ref."""
        return {r["name"] for r in self.db.read("SELECT name FROM repos")}

    def list_repos(self, ref_of: str | None = None) -> list[Repo]:
        """All repositories and refs the caller may read, by name; with ``ref_of``, that
        repository's refs, by ref."""
        if ref_of is None:
            rows = self.db.read(f"{SELECT_REPOS} ORDER BY r.name")
        else:
            rows = self.db.read(
                f"{SELECT_REPOS} WHERE r.ref_of=:name ORDER BY r.branch", {"name": ref_of}
            )
        return [repo for repo in map(repo_from_row, rows) if readable(repo)]

    def index_versions(self) -> dict[str, tuple[Any, ...]]:
        """Each repository's and ref's index version: a value that changes whenever its vectors
        may have (a new registration, a published generation, a stage's progress, a chain's
        start or end), so figures read from Chroma can be kept until it moves."""
        rows = self.db.read(
            "SELECT r.name, r.uid, r.generation, r.status, c.stages, c.vectors_mark, "
            "r.indexed_at FROM repos r LEFT JOIN chains c ON c.repo = r.name"
        )
        return {r["name"]: tuple(r[1:]) for r in rows}

    def update_repo(
        self, name: str, registration: str | None = None, **fields: Unpack[RepoFields]
    ) -> None:
        """Set columns of a repository row; with ``registration``, only of that registration
        (NotFound when the repository was deleted or registered again since)."""
        columns = encode(fields)
        if not columns:
            return
        # values are bound as :set_<column>, so no column name can clash with :name
        cols = ", ".join(f"{k}=:set_{k}" for k in columns)
        params = {f"set_{k}": v for k, v in columns.items()}

        def update(conn: Tx) -> None:
            if registration is not None:
                check_registration(conn, name, registration)
            conn.execute(f"UPDATE repos SET {cols} WHERE name=:name", {**params, "name": name})

        self.db.write(update)

    def delete_repo(self, name: str) -> None:
        """Remove a repository with every row of it (vectors are the caller's)."""

        def delete(conn: Tx) -> None:
            for table in REPO_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE repo=:name", {"name": name})
            conn.execute("DELETE FROM repos WHERE name=:name", {"name": name})

        self.db.write(delete)

    def published(self, repo: str) -> tuple[int, str]:
        """(generation, registration id) of the repository's index: how many times it was
        published, 0 before it was ever ready; (-1, "") for an unknown repository."""
        rows = self.db.read("SELECT generation, uid FROM repos WHERE name=:n", {"n": repo})
        return (int(rows[0]["generation"]), rows[0]["uid"] or "") if rows else (-1, "")

    def dirty_files(self, name: str) -> set[str]:
        """Paths that changed in the working tree since the last index (recorded by reindex)."""
        rows = self.db.read("SELECT dirty FROM repos WHERE name=:name", {"name": name})
        return set(json.loads(rows[0]["dirty"] or "[]")) if rows else set()

    def refs_waiting_on(self, name: str, now: float) -> list[str]:
        """Keys of repository ``name``'s refs never indexed, queued and not held by a live lease
        at ``now``."""
        rows = self.db.read(
            "SELECT r.name FROM repos r LEFT JOIN chains c ON c.repo = r.name "
            "WHERE r.ref_of=:name AND r.commit_sha IS NULL AND r.status='queued' "
            "AND (c.lease_owner IS NULL OR c.lease_until IS NULL OR c.lease_until < :now) "
            "ORDER BY r.name",
            {"name": name, "now": now},
        )
        return [r["name"] for r in rows]

    def refs_never_indexed(self) -> dict[str, str]:
        """Every queued ref never indexed, with the repository it belongs to."""
        rows = self.db.read(
            "SELECT name, ref_of FROM repos WHERE ref_of IS NOT NULL AND commit_sha IS NULL "
            "AND status='queued'"
        )
        return {r["name"]: r["ref_of"] for r in rows}

    def is_ref_of(self, key: str, name: str) -> bool:
        """Whether ``key`` is a registered ref of repository ``name``."""
        rows = self.db.read(
            "SELECT 1 FROM repos WHERE name=:key AND ref_of=:name", {"key": key, "name": name}
        )
        return bool(rows)


# --- statements inside another module's transaction -----------------------------------------------


def exists(conn: Tx, name: str) -> bool:
    """Whether a repository or ref of that name is registered."""
    return (
        conn.execute("SELECT 1 FROM repos WHERE name=:name", {"name": name}).fetchone() is not None
    )


def insert_row(
    conn: Tx,
    name: str,
    path: str | None,
    url: str | None,
    branch: str | None,
    ref_of: str | None = None,
    progress: str | None = None,
) -> None:
    """Insert a queued repository (or, with ``ref_of``, a ref) under a fresh registration id."""
    conn.execute(
        "INSERT INTO repos (name, path, url, branch, status, uid, ref_of, progress, created_at) "
        "VALUES (:name, :path, :url, :branch, 'queued', :uid, :ref_of, :progress, :now)",
        {"name": name, "path": path, "url": url, "branch": branch, "uid": uuid.uuid4().hex,
         "ref_of": ref_of, "progress": progress, "now": now_iso()},
    )  # fmt: skip


def check_registration(conn: Tx, name: str, registration: str) -> None:
    """NotFound unless ``name`` is still the registration a job started on."""
    row = conn.execute("SELECT uid FROM repos WHERE name=:name", {"name": name}).fetchone()
    if row is None or (row[0] or "") != registration:
        raise NotFound(f"repository {name!r} was deleted (or deleted and registered again)")


def require(conn: Tx, name: str, registration: str | None) -> None:
    """NotFound unless the repository exists (with ``registration``: is still that
    registration)."""
    if registration is not None:
        check_registration(conn, name, registration)
    elif not exists(conn, name):
        raise NotFound(f"repository {name!r} was deleted")


def is_registration(conn: Tx, name: str, registration: str) -> bool:
    """Whether ``name`` is still that registration."""
    row = conn.execute("SELECT uid FROM repos WHERE name=:name", {"name": name}).fetchone()
    return row is not None and (row[0] or "") == registration


def set_failed(conn: Tx, name: str, error: str) -> None:
    """The repository's index failed for good, with ``error``."""
    conn.execute(
        "UPDATE repos SET status='error', error=:error WHERE name=:name",
        {"error": error, "name": name},
    )


def _of(name: str, registration: str) -> dict[str, str]:
    return {"name": name, "registration": registration}


def publish_keywords(conn: Tx, name: str, registration: str, files: int, units: int) -> bool:
    """The registration's new units searchable (status ready, a new generation, vectors
    owed); False when the repository or registration is gone."""
    return bool(
        conn.execute(
            "UPDATE repos SET status='ready', files=:files, units=:units, complete=0, "
            "searchable_at=:now, generation=generation+1 "
            "WHERE name=:name AND COALESCE(uid, '')=:registration",
            {"files": files, "units": units, "now": now_iso(), **_of(name, registration)},
        ).rowcount
    )


def publish_complete(
    conn: Tx, name: str, registration: str, files: int, units: int, commit: str | None
) -> bool:
    """The registration's index complete at ``commit`` (a new generation); False when the
    repository or registration is gone."""
    return bool(
        conn.execute(
            "UPDATE repos SET status='ready', files=:files, units=:units, commit_sha=:commit, "
            "indexed_at=:now, progress=NULL, error=NULL, complete=1, generation=generation+1 "
            "WHERE name=:name AND COALESCE(uid, '')=:registration",
            {
                "files": files,
                "units": units,
                "commit": commit,
                "now": now_iso(),
                **_of(name, registration),
            },
        ).rowcount
    )


def set_skipped_counts(conn: Tx, name: str, counts: dict[str, int]) -> None:
    """Record the repository's files left out, counted by reason."""
    conn.execute(
        "UPDATE repos SET skipped=:n, skipped_reasons=:reasons WHERE name=:repo",
        {"n": sum(counts.values()), "reasons": json.dumps(counts), "repo": name},
    )


def set_silhouette(conn: Tx, name: str, score: float | None) -> None:
    """Record the clustering's silhouette score of the repository."""
    conn.execute(
        "UPDATE repos SET silhouette=:score WHERE name=:repo", {"score": score, "repo": name}
    )


@dataclass(frozen=True)
class ForkSource:
    """What a ref's fork needs of its repository's row."""

    commit: str | None
    complete: bool
    dirty: str | None


def fork_source(conn: Tx, parent: str) -> ForkSource | None:
    """The parent's commit, completeness and dirty paths; None if it is gone."""
    row = conn.execute(
        "SELECT commit_sha, complete, dirty FROM repos WHERE name=:parent", {"parent": parent}
    ).fetchone()
    return None if row is None else ForkSource(row[0], bool(row[1]), row[2])


def set_forked(conn: Tx, key: str, commit: str | None, dirty: str | None) -> None:
    """Record that ref ``key`` holds its repository's index at ``commit``."""
    conn.execute(
        "UPDATE repos SET commit_sha=:commit, dirty=:dirty WHERE name=:key",
        {"commit": commit, "dirty": dirty, "key": key},
    )
