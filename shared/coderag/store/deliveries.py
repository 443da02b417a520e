"""Webhook deliveries already acted on, per provider, remembered for a while: by the provider's
delivery id and by what was delivered (a hash of the signed body), so a captured body sent again
under a new id, or with none, is a duplicate too."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from coderag.store.database import Database, Tx

T = TypeVar("T")


class Deliveries:
    """The ``webhook_deliveries`` table (``catalog.deliveries``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def record_then(
        self,
        provider: str,
        delivery: str | None,
        now: str,
        forget_before: str,
        then: Callable[[], T],
        also: Sequence[str] = (),
    ) -> T | None:
        """Record a delivery id and the keys ``also`` (forgetting those older than
        ``forget_before``) and run ``then`` in the same transaction, so its failure forgets them
        again; None (and ``then`` not run) when any of them was already recorded. With no id
        and no other key, ``then`` just runs."""

        def txn(conn: Tx) -> T | None:
            keys = [k for k in (delivery, *also) if k]
            if keys:
                conn.execute(
                    "DELETE FROM webhook_deliveries WHERE received_at < :before",
                    {"before": forget_before},
                )
            seen = False
            for key in keys:
                cur = conn.execute(
                    "INSERT INTO webhook_deliveries (provider, delivery, received_at) "
                    "VALUES (:provider, :delivery, :now) ON CONFLICT DO NOTHING",
                    {"provider": provider, "delivery": key, "now": now},
                )
                seen = seen or cur.rowcount == 0
            return None if seen else then()

        return self._db.write(txn)
