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

from coderag.store import Catalog, leases


def start_chain(catalog: Catalog, name: str, lease_s: float) -> str | None:
    """Take the repository's lease for a new chain and return its token; None (and ``pending``
    set) when a live chain holds it."""
    now = time.time()
    return leases.claim(catalog.db, name, uuid.uuid4().hex, now, now + lease_s)


def continue_chain(catalog: Catalog, name: str, token: str | None, lease_s: float) -> bool:
    """Renew the lease for the next stage of chain ``token``; False when another chain took
    over (this one was given up for dead) and the stage must not run. A stage queued by an older
    version (no token) runs."""
    if token is None:
        return True
    return leases.renew(catalog.db, name, token, time.time() + lease_s)


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
                    leases.beat(conn, name, token, time.time() + lease_s)
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
        leases.release(catalog.db, name, token)


def finish_chain(catalog: Catalog, name: str, token: str | None) -> bool:
    """End chain ``token`` (the repository is ready); returns whether a reindex is pending."""
    return leases.finish(catalog.db, name, token)
