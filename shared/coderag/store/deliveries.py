"""Webhook deliveries already acted on, remembered for a while: by the provider's delivery id (per
provider) and by what was delivered (a hash of the signed body, across providers), so a captured
body sent again under a new id, with none, or to another provider's endpoint (GitHub and Gitea
sign with the same HMAC) is a duplicate too."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from coderag.store.database import Database, Tx

T = TypeVar("T")

ANY_PROVIDER = "*"
"""The provider column of a content key (``also``): one row, whichever endpoint it came through."""


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
        """Record a delivery id (as ``provider``'s) and the content keys ``also`` (as any
        provider's), forgetting those older than ``forget_before``, and run ``then`` in the same
        transaction, so its failure forgets them again; None (and ``then`` not run) when any of
        them was already recorded. With no id and no other key, ``then`` just runs."""

        def txn(conn: Tx) -> T | None:
            content = [key for key in also if key]
            keys = [(provider, delivery)] if delivery else []
            keys += [(ANY_PROVIDER, key) for key in content]
            if keys:
                conn.execute(
                    "DELETE FROM webhook_deliveries WHERE received_at < :before",
                    {"before": forget_before},
                )
            # rows written before content keys were shared carry their provider's name; they
            # are forgotten within the TTL, and until then still count for that provider
            seen = bool(content) and bool(
                conn.execute(
                    "SELECT 1 FROM webhook_deliveries WHERE provider = :provider "
                    "AND delivery IN :keys",
                    {"provider": provider, "keys": content},
                ).fetchone()
            )
            for owner, key in keys:
                cur = conn.execute(
                    "INSERT INTO webhook_deliveries (provider, delivery, received_at) "
                    "VALUES (:provider, :delivery, :now) ON CONFLICT DO NOTHING",
                    {"provider": owner, "delivery": key, "now": now},
                )
                seen = seen or cur.rowcount == 0
            return None if seen else then()

        return self._db.write(txn)
