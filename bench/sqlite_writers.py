"""20 processes writing one SQLite file at once, with the writer of this checkout
(``coderag.store.database``) or of a git revision from before it (its
``shared/coderag/store/sqlite.py``, which imports only the standard library).

    python -m bench.sqlite_writers            # this checkout
    python -m bench.sqlite_writers --rev main # the writer on main

Prints the errors seen, the audit rows written (of 500) and the distinct values of a counter
bumped by read-then-write transactions (500 distinct means no update was lost).
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from coderag.store.database import Database

HERE = Path(__file__).resolve().parent
WRITERS, ROWS = 20, 25


def _load(path: str):
    if not path:
        return Database
    spec = importlib.util.spec_from_file_location("writer_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Database


# literal SQL only: the old writer binds ``?`` parameters, this checkout's ``:name`` ones
def _bump(conn) -> None:
    n = conn.execute("SELECT count(*) FROM counter").fetchone()[0]
    conn.execute(f"INSERT INTO counter (n) VALUES ({int(n) + 1})")


def _audit(conn) -> None:
    conn.execute(
        'INSERT INTO audit (ts, "user", endpoint, repo, query, retrieved_files, response_ms, '
        "status) VALUES ('2026-01-01T00:00:00.000Z', 'u', '/search', 'r', 'q', '[]', 1, 'ok')"
    )


def _writer(module_path: str, db_path: str, start) -> str:
    try:
        db = _load(module_path)(Path(db_path))
        db.write(lambda c: c.execute("CREATE TABLE IF NOT EXISTS counter (n INTEGER NOT NULL)"))
        start.wait()
        for _ in range(ROWS):
            db.write(_audit)
            db.write(_bump)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def main() -> None:
    """Run the writers and print what they left."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rev", help="git revision whose writer to use (default: this checkout)")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp())
    module = ""
    if args.rev:
        module = work / "sqlite_rev.py"
        text = subprocess.run(
            ["git", "show", f"{args.rev}:shared/coderag/store/sqlite.py"],
            cwd=HERE,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        module.write_text(text)
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Manager().Barrier(WRITERS)
    with ctx.Pool(WRITERS) as pool:
        errors = pool.starmap(_writer, [(str(module), str(work / "x.db"), start)] * WRITERS)
    conn = sqlite3.connect(work / "x.db")
    rows = conn.execute("SELECT count(*) FROM audit").fetchone()[0]
    distinct = conn.execute("SELECT count(DISTINCT n) FROM counter").fetchone()[0]
    print(f"writer: {args.rev or 'this checkout'}")
    print(f"errors: {sorted({e for e in errors if e})[:3]}")
    print(f"audit rows: {rows} of {WRITERS * ROWS}; distinct counter values: {distinct}")
    sys.exit(0)


if __name__ == "__main__":
    main()
