"""Webhook delivery ids already acted on, per provider, remembered for a while."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from coderag.store.sqlite import Database

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    provider TEXT NOT NULL,
    delivery TEXT NOT NULL,
    received_at TEXT NOT NULL,
    PRIMARY KEY (provider, delivery)
)"""
"""Delivery ids already acted on, per provider, with the time they arrived."""


def record_then(
    db: Database,
    provider: str,
    delivery: str | None,
    now: str,
    forget_before: str,
    then: Callable[[], T],
) -> T | None:
    """Record a delivery id (forgetting those older than ``forget_before``) and run ``then`` in
    the same transaction, so its failure forgets the id again; None (and ``then`` not run) for
    an id already recorded. Without an id, ``then`` just runs."""

    def txn(conn: sqlite3.Connection) -> T | None:
        conn.execute(SCHEMA)
        if delivery:
            conn.execute("DELETE FROM webhook_deliveries WHERE received_at < ?", (forget_before,))
            cur = conn.execute(
                "INSERT OR IGNORE INTO webhook_deliveries (provider, delivery, received_at) "
                "VALUES (?,?,?)",
                (provider, delivery, now),
            )
            if cur.rowcount == 0:
                return None
        return then()

    return db.write(txn)
