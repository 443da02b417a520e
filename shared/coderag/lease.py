"""One indexing chain (parse → embed → refresh) per repository at a time, held by a lease on the
repository row.

The job that runs a stage renews the lease while it works; a worker killed with ``kill -9`` stops
renewing, its lease runs out, and ``heal`` starts the chain again. A reindex asked for while a
chain runs sets ``pending`` and returns: the chain runs once more when it ends, so requests queue
once and never run in parallel. Every write of a stage also checks the registration id, so a chain
of a deleted repository never writes into a new one of the same name.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from coderag.store import Catalog


def start_chain(catalog: Catalog, name: str, lease_s: float) -> str | None:
    """Take the repository's lease for a new chain and return its token; None (and ``pending``
    set) when a live chain holds it."""
    token = uuid.uuid4().hex

    def claim(conn: sqlite3.Connection) -> str | None:
        row = conn.execute("SELECT lease_until FROM repos WHERE name=?", (name,)).fetchone()
        now = time.time()
        if row is None:
            return None
        if row[0] is not None and row[0] > now:
            conn.execute("UPDATE repos SET pending=1 WHERE name=?", (name,))
            return None
        conn.execute(
            "UPDATE repos SET lease_owner=?, lease_until=?, pending=0 WHERE name=?",
            (token, now + lease_s, name),
        )
        return token

    return catalog.db.write(claim)


def continue_chain(catalog: Catalog, name: str, token: str | None, lease_s: float) -> bool:
    """Renew the lease for the next stage of chain ``token``; False when another chain took
    over (this one was given up for dead) and the stage must not run. A stage queued by an older
    version (no token) runs."""
    if token is None:
        return True

    def renew(conn: sqlite3.Connection) -> int:
        return conn.execute(
            "UPDATE repos SET lease_until=? WHERE name=? AND lease_owner=?",
            (time.time() + lease_s, name, token),
        ).rowcount

    return bool(catalog.db.write(renew))


@contextmanager
def renewing(catalog: Catalog, name: str, token: str | None, lease_s: float) -> Iterator[None]:
    """Keep the lease of chain ``token`` alive while the body runs."""
    if token is None:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        # its own connection: a beat must not wait behind this process's big writes
        conn = sqlite3.connect(catalog.db.path, timeout=30)
        try:
            while not stop.wait(lease_s / 4):
                with contextlib.suppress(sqlite3.Error):  # a missed beat only shortens it
                    conn.execute(
                        "UPDATE repos SET lease_until=? WHERE name=? AND lease_owner=?",
                        (time.time() + lease_s, name, token),
                    )
                    conn.commit()
        finally:
            conn.close()

    thread = threading.Thread(target=beat, name=f"lease-{name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def release(catalog: Catalog, name: str, token: str | None) -> None:
    """Let a retry of a failed stage (or another chain) take the lease at once."""
    if token is not None:
        catalog.db.write(
            lambda c: c.execute(
                "UPDATE repos SET lease_until=NULL WHERE name=? AND lease_owner=?", (name, token)
            )
        )


def finish_chain(catalog: Catalog, name: str, token: str | None) -> bool:
    """End chain ``token`` (the repository is ready); returns whether a reindex is pending."""

    def finish(conn: sqlite3.Connection) -> bool:
        row = conn.execute(
            "SELECT pending, lease_owner FROM repos WHERE name=?", (name,)
        ).fetchone()
        if row is None or (token is not None and row[1] not in (None, token)):
            return False
        conn.execute(
            "UPDATE repos SET lease_owner=NULL, lease_until=NULL, pending=0, attempts=0 "
            "WHERE name=?",
            (name,),
        )
        return bool(row[0])

    return catalog.db.write(finish)
