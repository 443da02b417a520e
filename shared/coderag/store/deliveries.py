"""Webhook delivery ids already acted on, per provider, remembered for a while."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from coderag.store.database import Database, Tx

T = TypeVar("T")


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

    def txn(conn: Tx) -> T | None:
        if delivery:
            conn.execute(
                "DELETE FROM webhook_deliveries WHERE received_at < :before",
                {"before": forget_before},
            )
            cur = conn.execute(
                "INSERT INTO webhook_deliveries (provider, delivery, received_at) "
                "VALUES (:provider, :delivery, :now) ON CONFLICT DO NOTHING",
                {"provider": provider, "delivery": delivery, "now": now},
            )
            if cur.rowcount == 0:
                return None
        return then()

    return db.write(txn)
