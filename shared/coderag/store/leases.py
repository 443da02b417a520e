"""Leases on repository rows: which indexing chain may write a repository now, and whether a
reindex waits for it (the policy is ``coderag.lease``; this is its SQL)."""

from __future__ import annotations

import sqlite3

from coderag.store.sqlite import Database

RENEW = "UPDATE repos SET lease_until=? WHERE name=? AND lease_owner=?"
"""Extend chain ``lease_owner``'s lease (its heartbeat runs it on a connection of its own)."""


def claim(db: Database, name: str, token: str, now: float, until: float) -> str | None:
    """Give the lease to ``token`` unless a live one holds it (then mark a reindex pending);
    the token, or None."""

    def txn(conn: sqlite3.Connection) -> str | None:
        row = conn.execute("SELECT lease_until FROM repos WHERE name=?", (name,)).fetchone()
        if row is None:
            return None
        if row[0] is not None and row[0] > now:
            conn.execute("UPDATE repos SET pending=1 WHERE name=?", (name,))
            return None
        conn.execute(
            "UPDATE repos SET lease_owner=?, lease_until=?, pending=0 WHERE name=?",
            (token, until, name),
        )
        return token

    return db.write(txn)


def renew(db: Database, name: str, token: str, until: float) -> bool:
    """Extend chain ``token``'s lease; False when another chain holds it."""
    return bool(db.write(lambda conn: conn.execute(RENEW, (until, name, token)).rowcount))


def beat(conn: sqlite3.Connection, name: str, token: str, until: float) -> None:
    """Extend the lease on a heartbeat's own connection (never behind this process's writes)."""
    conn.execute(RENEW, (until, name, token))
    conn.commit()


def release(db: Database, name: str, token: str) -> None:
    """Let the lease of chain ``token`` run out now."""
    db.write(
        lambda conn: conn.execute(
            "UPDATE repos SET lease_until=NULL WHERE name=? AND lease_owner=?", (name, token)
        )
    )


def finish(db: Database, name: str, token: str | None) -> bool:
    """End chain ``token`` and its retry count; whether a reindex was pending (False when
    another chain holds the row)."""

    def txn(conn: sqlite3.Connection) -> bool:
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

    return db.write(txn)


def unfinished(db: Database, states: tuple[str, ...]) -> list[sqlite3.Row]:
    """Repositories mid-chain: in one of ``states``, or ready but still owing vectors
    (coderag.stages); name, lease_until, attempts, progress."""
    marks = ",".join("?" * len(states))
    return db.read(
        "SELECT name, lease_until, attempts, progress FROM repos "
        f"WHERE status IN ({marks}) OR (status='ready' AND complete=0)",
        states,
    )
