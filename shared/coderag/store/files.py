"""The tables of a repository's files: ``files`` (each indexed file and its content hash),
``file_history`` (recent commits per file) and ``skipped_files`` (files left out, and why); and
``replace_files``, which writes a parse's files with their units, symbols, calls and imports in
one transaction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coderag.schemas import Unit
from coderag.store import graph, repos
from coderag.store import symbols as symbol_table
from coderag.store import units as unit_table
from coderag.store.database import Database, Tx, insert_sql
from coderag.store.tables import FILE_COLUMN, FILE_TABLES

UNBLAMED = ":unblamed"
"""Suffix of a file's version while its units' last commits are not recorded yet."""

FILE_FIELDS = ("repo", "path", "language", "lines", "sha", "blamed")
"""Columns of a file row."""

DELETE_CHUNK = 500
"""Files whose rows one DELETE removes (a statement per file and table cost seconds at a first
index of thousands of files, through SQLAlchemy)."""


@dataclass(frozen=True)
class IndexedFile:
    """An indexed file's language and line count."""

    language: str
    lines: int


def _delete_file_rows(conn: Tx, repo: str, paths: list[str]) -> None:
    for i in range(0, len(paths), DELETE_CHUNK):
        chunk = paths[i : i + DELETE_CHUNK]
        for table in FILE_TABLES:
            col = FILE_COLUMN.get(table, "file")
            conn.execute(
                f"DELETE FROM {table} WHERE repo=:repo AND {col} IN :paths",
                {"repo": repo, "paths": chunk},
            )


class Files:
    """Reads and writes of a repository's files (a part of ``Catalog``)."""

    db: Database

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
        symbol_rows, call_rows, import_rows = list(symbols), list(calls), list(imports)

        def replace(conn: Tx) -> None:
            repos.require(conn, repo, registration)
            _delete_file_rows(conn, repo, [path for path, *_ in files])
            conn.executemany(
                insert_sql("files", FILE_FIELDS),
                [dict(zip(FILE_FIELDS, (repo, *f, int(blamed)), strict=True)) for f in files],
            )
            unit_table.upsert(conn, units)
            symbol_table.insert(conn, repo, symbol_rows)
            graph.insert(conn, repo, call_rows, import_rows)

        self.db.write(replace)

    def remove_files(
        self, repo: str, paths: Iterable[str], registration: str | None = None
    ) -> list[str]:
        """Delete files and all their rows (with ``registration``, only of that registration);
        returns the ids of the removed units."""
        paths = list(paths)

        def remove(conn: Tx) -> list[str]:
            if registration is not None:
                repos.check_registration(conn, repo, registration)
            ids: list[str] = []
            for path in paths:
                ids += unit_table.ids_of_file(conn, repo, path)
            _delete_file_rows(conn, repo, paths)
            return ids

        return self.db.write(remove)

    def set_history(
        self, repo: str, commits: dict[str, int], registration: str | None = None
    ) -> None:
        """Replace the repository's recent-commit counts per file."""

        def write(conn: Tx) -> None:
            if registration is not None:
                repos.check_registration(conn, repo, registration)
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
                repos.check_registration(conn, repo, registration)
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
            repos.set_skipped_counts(conn, repo, counts)
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
                repos.check_registration(conn, repo, registration)
            unit_table.set_last_commits(conn, repo, rows)
            conn.executemany(
                "UPDATE files SET blamed=1 WHERE repo=:repo AND path=:path",
                [{"repo": repo, "path": p} for p in paths],
            )

        self.db.write(write)

    def file_lines(self, repo: str, path: str) -> int | None:
        """Line count of an indexed file, or None if it is not indexed."""
        found = self.indexed_file(repo, path)
        return found.lines if found else None

    def indexed_file(self, repo: str, path: str) -> IndexedFile | None:
        """An indexed file's language and line count, or None if it is not indexed."""
        rows = self.db.read(
            "SELECT language, lines FROM files WHERE repo=:repo AND path=:path",
            {"repo": repo, "path": path},
        )
        return IndexedFile(rows[0]["language"], rows[0]["lines"]) if rows else None

    def indexed_among(self, repo: str, paths: Iterable[str]) -> set[str]:
        """Those of ``paths`` that are indexed files of the repository."""
        wanted = sorted(set(paths))
        if not wanted:
            return set()
        rows = self.db.read(
            "SELECT path FROM files WHERE repo=:repo AND path IN :paths",
            {"repo": repo, "paths": wanted},
        )
        return {r["path"] for r in rows}

    def indexed_under(self, repo: str, folder: str) -> set[str]:
        """The indexed files of the repository inside ``folder`` (a path without its ``/``)."""
        prefix = folder.strip("/") + "/"
        rows = self.db.read(
            "SELECT path FROM files WHERE repo=:repo AND substr(path, 1, :n) = :prefix",
            {"repo": repo, "n": len(prefix), "prefix": prefix},
        )
        return {r["path"] for r in rows}

    def total_lines(self, repo: str) -> int:
        """Lines of every indexed file of a repository."""
        rows = self.db.read("SELECT SUM(lines) FROM files WHERE repo=:r", {"r": repo})
        return int(rows[0][0] or 0)

    def counts(self, repo: str) -> tuple[int, int]:
        """(files, units) indexed for a repository."""
        files = self.db.read("SELECT COUNT(*) FROM files WHERE repo=:r", {"r": repo})[0][0]
        units = self.db.read("SELECT COUNT(*) FROM units WHERE repo=:r", {"r": repo})[0][0]
        return files, units
