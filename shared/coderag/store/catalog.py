"""The catalog: repositories, their files and their units (``coderag.store.database``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from coderag.errors import Conflict, NotFound
from coderag.eta import eta_seconds
from coderag.schemas import RepoOut, Unit
from coderag.store.database import Database, Row, Tx

UNIT_FIELDS = (
    "id", "repo", "file", "start_line", "end_line", "symbol", "kind", "language", "signature",
    "doc", "text", "is_test", "content_hash", "facts", "last_commit", "last_author", "last_date",
)  # fmt: skip
"""Columns of a unit, in the order they are written and read."""

UNIT_COLUMNS = ", ".join(UNIT_FIELDS)
"""The unit columns as a SELECT list."""

_UPSERT_UNIT = (
    f"INSERT INTO units ({UNIT_COLUMNS}) VALUES ({', '.join(':' + c for c in UNIT_FIELDS)}) "
    "ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in UNIT_FIELDS if c != "id")
)


def now_iso() -> str:
    """Current UTC time as ISO 8601 with a Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def unit_from_row(row: Row) -> Unit:
    """Rebuild a Unit from a ``units`` row."""
    return Unit(
        repo=row["repo"],
        file=row["file"],
        start_line=row["start_line"],
        end_line=row["end_line"],
        symbol=row["symbol"],
        kind=row["kind"],
        language=row["language"],
        signature=row["signature"],
        doc=row["doc"],
        text=row["text"],
        is_test=bool(row["is_test"]),
        facts=json.loads(row["facts"]),
        last_commit=row["last_commit"],
        last_author=row["last_author"],
        last_date=row["last_date"],
    )


UNBLAMED = ":unblamed"
"""Suffix of a file's version while its units' last commits are not recorded yet."""

FILE_TABLES = ("units", "files", "symbols", "calls", "imports", "file_history", "skipped_files")
"""Tables whose rows belong to one file of one repository."""

_FILE_COLUMN = {"files": "path"}

REPO_TABLES = (*FILE_TABLES, "clusters", "session_turns")
"""Tables whose rows belong to one repository (its ``repo`` column)."""


DELETE_CHUNK = 500
"""Files whose rows one DELETE removes (a statement per file and table cost seconds at a first
index of thousands of files, through SQLAlchemy)."""


def _delete_file_rows(conn: Tx, repo: str, paths: list[str]) -> None:
    for i in range(0, len(paths), DELETE_CHUNK):
        chunk = paths[i : i + DELETE_CHUNK]
        for table in FILE_TABLES:
            col = _FILE_COLUMN.get(table, "file")
            conn.execute(
                f"DELETE FROM {table} WHERE repo=:repo AND {col} IN :paths",
                {"repo": repo, "paths": chunk},
            )


class Catalog:
    """Reads and writes of repositories, files and units."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create_repo(
        self, name: str, path: str | None, url: str | None, branch: str | None
    ) -> RepoOut:
        """Register a repository as queued, under a fresh registration id; Conflict if the name
        is taken."""

        def insert(conn: Tx) -> None:
            if conn.execute("SELECT 1 FROM repos WHERE name=:name", {"name": name}).fetchone():
                raise Conflict(f"repository {name!r} already exists; DELETE it or pick a name")
            conn.execute(
                "INSERT INTO repos (name, path, url, branch, status, uid, created_at) "
                "VALUES (:name, :path, :url, :branch, 'queued', :uid, :now)",
                {"name": name, "path": path, "url": url, "branch": branch,
                 "uid": uuid.uuid4().hex, "now": now_iso()},
            )  # fmt: skip

        self.db.write(insert)
        return self.get_repo(name)

    def get_repo(self, name: str) -> RepoOut:
        """The repository's state; NotFound if unknown."""
        rows = self.db.read("SELECT * FROM repos WHERE name=:name", {"name": name})
        if not rows:
            raise NotFound(f"no repository named {name!r}; POST /repos to add it")
        return _repo_out(rows[0])

    def registration(self, name: str) -> str:
        """The registration id of the repository now named ``name`` ('' for one registered before
        ids existed); NotFound if unknown. Jobs, caches and vectors are keyed by it, so nothing of
        a deleted repository reaches a new one of the same name."""
        rows = self.db.read("SELECT uid FROM repos WHERE name=:name", {"name": name})
        if not rows:
            raise NotFound(f"no repository named {name!r}; POST /repos to add it")
        return rows[0]["uid"] or ""

    def names(self) -> set[str]:
        """The names of every repository and ref."""
        return {r["name"] for r in self.db.read("SELECT name FROM repos")}

    def list_repos(self, ref_of: str | None = None) -> list[RepoOut]:
        """All repositories and refs, by name; with ``ref_of``, that repository's refs, by ref."""
        if ref_of is None:
            return [_repo_out(r) for r in self.db.read("SELECT * FROM repos ORDER BY name")]
        rows = self.db.read(
            "SELECT * FROM repos WHERE ref_of=:name ORDER BY branch", {"name": ref_of}
        )
        return [_repo_out(r) for r in rows]

    def index_versions(self) -> dict[str, tuple[Any, ...]]:
        """Each repository's and ref's index version: a value that changes whenever its vectors
        may have (a new registration, a published generation, a stage's progress, a chain's
        start or end), so figures read from Chroma can be kept until it moves."""
        rows = self.db.read(
            "SELECT name, uid, generation, status, stages, vectors_mark, indexed_at FROM repos"
        )
        return {r["name"]: tuple(r[1:]) for r in rows}

    def update_repo(self, name: str, registration: str | None = None, **fields: object) -> None:
        """Set columns of a repository row; with ``registration``, only of that registration
        (NotFound when the repository was deleted or registered again since)."""
        if not fields:
            return
        # values are bound as :set_<column>, so no column name can clash with :name
        cols = ", ".join(f"{k}=:set_{k}" for k in fields)
        params = {f"set_{k}": v for k, v in fields.items()}

        def update(conn: Tx) -> None:
            if registration is not None:
                _check_registration(conn, name, registration)
            conn.execute(f"UPDATE repos SET {cols} WHERE name=:name", {**params, "name": name})

        self.db.write(update)

    def delete_repo(self, name: str) -> None:
        """Remove a repository with its files and units (vectors are the caller's)."""

        def delete(conn: Tx) -> None:
            for table, col in (*((t, "repo") for t in REPO_TABLES), ("repos", "name")):
                conn.execute(f"DELETE FROM {table} WHERE {col}=:name", {"name": name})

        self.db.write(delete)

    def replace_files(
        self,
        repo: str,
        files: Iterable[tuple[str, str, int, str]],
        units: list[Unit],
        symbols: Iterable[tuple[Any, ...]] = (),
        calls: Iterable[tuple[Any, ...]] = (),
        imports: Iterable[tuple[Any, ...]] = (),
        registration: str | None = None,
        blamed: bool = True,
    ) -> None:
        """Replace the given files (path, language, lines, sha) and all their rows: units,
        symbols (file, name, qualified, kind, start, end, unit_id), calls (file, caller_id,
        callee, receiver, receiver_type, line) and imports (file, module); with
        ``registration``, only into that registration of the repository; ``blamed`` False
        marks the files as owing their units' last commits (``set_blame``)."""
        files = list(files)
        symbols, calls, imports = list(symbols), list(calls), list(imports)

        def replace(conn: Tx) -> None:
            if registration is not None:
                _check_registration(conn, repo, registration)
            elif not conn.execute("SELECT 1 FROM repos WHERE name=:n", {"n": repo}).fetchone():
                raise NotFound(f"repository {repo!r} was deleted")
            _delete_file_rows(conn, repo, [path for path, *_ in files])
            conn.executemany(
                _insert("files", FILE_FIELDS), _named(FILE_FIELDS, repo, files, int(blamed))
            )
            conn.executemany(_UPSERT_UNIT, [_unit_row(u) for u in units])
            conn.executemany(
                _insert("symbols", SYMBOL_FIELDS), _named(SYMBOL_FIELDS, repo, symbols)
            )
            conn.executemany(_insert("calls", CALL_FIELDS), _named(CALL_FIELDS, repo, calls))
            conn.executemany(
                _insert("imports", IMPORT_FIELDS), _named(IMPORT_FIELDS, repo, imports)
            )

        self.db.write(replace)

    def remove_files(
        self, repo: str, paths: Iterable[str], registration: str | None = None
    ) -> list[str]:
        """Delete files and all their rows (with ``registration``, only of that registration);
        returns the ids of the removed units."""
        paths = list(paths)

        def remove(conn: Tx) -> list[str]:
            if registration is not None:
                _check_registration(conn, repo, registration)
            ids: list[str] = []
            for path in paths:
                ids += [
                    r[0]
                    for r in conn.execute(
                        "SELECT id FROM units WHERE repo=:repo AND file=:file",
                        {"repo": repo, "file": path},
                    )
                ]
            _delete_file_rows(conn, repo, paths)
            return ids

        return self.db.write(remove)

    def set_history(
        self, repo: str, commits: dict[str, int], registration: str | None = None
    ) -> None:
        """Replace the repository's recent-commit counts per file."""

        def write(conn: Tx) -> None:
            if registration is not None:
                _check_registration(conn, repo, registration)
            conn.execute("DELETE FROM file_history WHERE repo=:repo", {"repo": repo})
            conn.executemany(
                "INSERT INTO file_history (repo, file, commits) VALUES (:repo, :file, :n)",
                [{"repo": repo, "file": f, "n": n} for f, n in commits.items()],
            )

        self.db.write(write)

    def set_skipped(
        self,
        repo: str,
        skipped: dict[str, str],
        considered: Iterable[str] | None,
        registration: str | None = None,
    ) -> dict[str, int]:
        """Record files left out (path -> reason) among ``considered`` paths (None: the whole
        tree was walked, forget earlier ones) and refresh the repository's counts by reason."""
        considered = None if considered is None else list(considered)

        def write(conn: Tx) -> dict[str, int]:
            if registration is not None:
                _check_registration(conn, repo, registration)
            if considered is None:
                conn.execute("DELETE FROM skipped_files WHERE repo=:repo", {"repo": repo})
            else:
                conn.executemany(
                    "DELETE FROM skipped_files WHERE repo=:repo AND file=:file",
                    [{"repo": repo, "file": p} for p in considered],
                )
            conn.executemany(
                "INSERT INTO skipped_files (repo, file, reason) VALUES (:repo, :file, :reason) "
                "ON CONFLICT (repo, file) DO UPDATE SET reason=excluded.reason",
                [{"repo": repo, "file": p, "reason": r} for p, r in skipped.items()],
            )
            counts = {
                r[0]: r[1]
                for r in conn.execute(
                    "SELECT reason, COUNT(*) FROM skipped_files WHERE repo=:repo "
                    "GROUP BY reason ORDER BY reason",
                    {"repo": repo},
                )
            }
            conn.execute(
                "UPDATE repos SET skipped=:n, skipped_reasons=:reasons WHERE name=:repo",
                {"n": sum(counts.values()), "reasons": json.dumps(counts), "repo": repo},
            )
            return counts

        return self.db.write(write)

    def history(self, repo: str) -> dict[str, int]:
        """Recent commits per file."""
        rows = self.db.read(
            "SELECT file, commits FROM file_history WHERE repo=:repo", {"repo": repo}
        )
        return {r["file"]: r["commits"] for r in rows}

    def file_shas(self, repo: str) -> dict[str, str]:
        """Indexed files of a repository and their content hashes."""
        return {
            r["path"]: r["sha"]
            for r in self.db.read("SELECT path, sha FROM files WHERE repo=:repo", {"repo": repo})
        }

    def file_versions(self, repo: str) -> dict[str, str]:
        """Indexed files and a version that moves when their content or their units' last
        commits change (the content hash, marked while blame is owed)."""
        return {
            r["path"]: r["sha"] if r["blamed"] else r["sha"] + UNBLAMED
            for r in self.db.read(
                "SELECT path, sha, blamed FROM files WHERE repo=:repo", {"repo": repo}
            )
        }

    def unblamed_files(self, repo: str) -> list[str]:
        """Files whose units still owe their last commits, in path order."""
        rows = self.db.read(
            "SELECT path FROM files WHERE repo=:repo AND blamed=0 ORDER BY path", {"repo": repo}
        )
        return [r["path"] for r in rows]

    def set_blame(
        self,
        repo: str,
        paths: Iterable[str],
        rows: Iterable[tuple[str, str, str, str]],
        registration: str | None = None,
    ) -> None:
        """Record units' last commits, (unit id, commit, author, date), and mark ``paths``
        blamed."""
        paths, rows = list(paths), list(rows)

        def write(conn: Tx) -> None:
            if registration is not None:
                _check_registration(conn, repo, registration)
            conn.executemany(
                "UPDATE units SET last_commit=:c, last_author=:a, last_date=:d "
                "WHERE id=:id AND repo=:repo",
                [{"c": c, "a": a, "d": d, "id": uid, "repo": repo} for uid, c, a, d in rows],
            )
            conn.executemany(
                "UPDATE files SET blamed=1 WHERE repo=:repo AND path=:path",
                [{"repo": repo, "path": p} for p in paths],
            )

        self.db.write(write)

    def file_lines(self, repo: str, path: str) -> int | None:
        """Line count of an indexed file, or None if it is not indexed."""
        rows = self.db.read(
            "SELECT lines FROM files WHERE repo=:repo AND path=:path", {"repo": repo, "path": path}
        )
        return rows[0]["lines"] if rows else None

    def file_row(self, repo: str, path: str) -> Row | None:
        """An indexed file's language and line count, or None if it is not indexed."""
        rows = self.db.read(
            "SELECT language, lines FROM files WHERE repo=:repo AND path=:path",
            {"repo": repo, "path": path},
        )
        return rows[0] if rows else None

    def published(self, repo: str) -> tuple[int, str]:
        """(generation, registration id) of the repository's index: how many times it was
        published, 0 before it was ever ready; (-1, "") for an unknown repository."""
        rows = self.db.read("SELECT generation, uid FROM repos WHERE name=:n", {"n": repo})
        return (int(rows[0]["generation"]), rows[0]["uid"] or "") if rows else (-1, "")

    def units(self, repo: str, files: Iterable[str] | None = None) -> list[Unit]:
        """Units of a repository, optionally only of some files, in file and line order."""
        if files is None:
            rows = self.db.read(
                f"SELECT {UNIT_COLUMNS} FROM units WHERE repo=:repo ORDER BY file, start_line",
                {"repo": repo},
            )
            return [unit_from_row(r) for r in rows]
        out: list[Unit] = []
        for path in files:
            rows = self.db.read(
                f"SELECT {UNIT_COLUMNS} FROM units WHERE repo=:repo AND file=:file "
                "ORDER BY start_line",
                {"repo": repo, "file": path},
            )
            out += [unit_from_row(r) for r in rows]
        return out

    def unit_ids(self, repo: str) -> set[str]:
        """Ids of a repository's units."""
        return {r[0] for r in self.db.read("SELECT id FROM units WHERE repo=:r", {"r": repo})}

    def unit_hashes(self, repo: str) -> dict[str, str]:
        """Unit id -> content hash of a repository's units (what its vectors must encode)."""
        rows = self.db.read("SELECT id, content_hash FROM units WHERE repo=:r", {"r": repo})
        return {r["id"]: r["content_hash"] for r in rows}

    def units_by_id(self, ids: Iterable[str]) -> dict[str, Unit]:
        """Units with the given ids."""
        ids = list(ids)
        out: dict[str, Unit] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            for row in self.db.read(
                f"SELECT {UNIT_COLUMNS} FROM units WHERE id IN :ids", {"ids": chunk}
            ):
                out[row["id"]] = unit_from_row(row)
        return out

    def counts(self, repo: str) -> tuple[int, int]:
        """(files, units) indexed for a repository."""
        files = self.db.read("SELECT COUNT(*) FROM files WHERE repo=:r", {"r": repo})[0][0]
        units = self.db.read("SELECT COUNT(*) FROM units WHERE repo=:r", {"r": repo})[0][0]
        return files, units


def _check_registration(conn: Tx, name: str, registration: str) -> None:
    """NotFound unless ``name`` is still the registration a job started on."""
    row = conn.execute("SELECT uid FROM repos WHERE name=:name", {"name": name}).fetchone()
    if row is None or (row[0] or "") != registration:
        raise NotFound(f"repository {name!r} was deleted (or deleted and registered again)")


FILE_FIELDS = ("repo", "path", "language", "lines", "sha", "blamed")
"""Columns of a file row."""

SYMBOL_FIELDS = ("repo", "file", "name", "qualified", "kind", "start_line", "end_line", "unit_id")
"""Columns of a symbol row."""

CALL_FIELDS = ("repo", "file", "caller_id", "callee", "receiver", "receiver_type", "line")
"""Columns of a call row."""

IMPORT_FIELDS = ("repo", "file", "module")
"""Columns of an import row."""


def _insert(table: str, fields: tuple[str, ...]) -> str:
    """An INSERT of one row with a named parameter per column."""
    return (
        f"INSERT INTO {table} ({', '.join(fields)}) VALUES ({', '.join(':' + f for f in fields)})"
    )


def _named(
    fields: tuple[str, ...], repo: str, rows: Iterable[tuple[Any, ...]], *tail: object
) -> list[dict[str, Any]]:
    """Parameter sets for ``_insert``: the repository, each row's values, then ``tail``."""
    return [dict(zip(fields, (repo, *row, *tail), strict=True)) for row in rows]


def _unit_row(u: Unit) -> dict[str, object]:
    """A unit's parameters for ``_UPSERT_UNIT``."""
    values = (
        u.id,
        u.repo,
        u.file,
        u.start_line,
        u.end_line,
        u.symbol,
        u.kind,
        u.language,
        u.signature,
        u.doc,
        u.text,
        int(u.is_test),
        u.content_hash,
        json.dumps(u.facts, ensure_ascii=False),
        u.last_commit,
        u.last_author,
        u.last_date,
    )
    return dict(zip(UNIT_FIELDS, values, strict=True))


def _repo_out(row: Row) -> RepoOut:
    return RepoOut(
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
        error=row["error"],
        progress=row["progress"],
        ref_of=row["ref_of"],
        **_stage_fields(row),
    )


def _stage_fields(row: Row) -> dict[str, object]:
    """complete, stages and eta_s of a repository row (a row from before stages: complete when
    ready)."""
    keys = row.keys()
    state = json.loads(row["stages"] or "{}") if "stages" in keys else {}
    raw = row["complete"] if "complete" in keys else None
    complete = row["status"] == "ready" if raw is None else bool(raw)
    return {
        "complete": complete,
        "stages": {}
        if complete
        else {s: {k: e.get(k) for k in ("done", "total")} for s, e in state.items()},
        "eta_s": eta_seconds(state, complete),
        "searchable_at": row["searchable_at"] if "searchable_at" in keys else None,
    }
