"""A real PostgreSQL server for the tests, from the Debian package (``make postgres`` installs it):
initdb into a temporary folder, listening on a free loopback port only, stopped at the end.

PostgreSQL refuses to run as root, so as root the server runs as ``nobody`` (``runuser``) in a
folder it owns."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import psycopg

USER = "nobody"
"""The unprivileged account the server runs as when the tests run as root."""


def binaries() -> Path | None:
    """The folder of initdb and pg_ctl: on PATH, else the newest /usr/lib/postgresql/*/bin
    (where Debian's package puts them, off PATH)."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    return Path(versions[-1]).parent if versions else None


class Postgres:
    """One server: ``start``, then ``create`` a database per test (cheap), then ``stop``."""

    def __init__(self, bin_dir: Path, port: int) -> None:
        self.bin_dir = bin_dir
        self.port = port
        self.root = Path(tempfile.mkdtemp(prefix="coderag-pg-"))
        self.data = self.root / "data"

    def _run(self, tool: str, *args: str) -> None:
        """Run a server tool, as ``nobody`` when this process is root."""
        cmd = [str(self.bin_dir / tool), *args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", USER, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr or done.stdout}")

    def start(self) -> None:
        """initdb (trust authentication, UTF-8) and start on 127.0.0.1:port, the socket in the
        temporary folder; durability is traded for speed (fsync off)."""
        if os.geteuid() == 0:
            shutil.chown(self.root, USER)
        base = ("-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        try:
            # a language-aware default collation, as most servers have ("a" < "B" < "b"), so the
            # tests see where PostgreSQL's order differs from SQLite's byte order
            self._run("initdb", *base, "--locale-provider=icu", "--icu-locale=en-US")
        except RuntimeError:  # before PostgreSQL 15, or built without ICU
            shutil.rmtree(self.data, ignore_errors=True)
            self._run("initdb", *base)
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        log = str(self.root / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-l", log, "-o", options, "-w", "start")

    def url(self, database: str = "postgres") -> str:
        """The URL of one database of this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create(self, prefix: str = "t") -> str:
        """A new empty database; its URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
