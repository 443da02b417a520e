"""An indexing chain's state (the policy is ``coderag.chain``; this is its SQL), in the
``chains`` table this module owns, one row per repository a chain has run for: the lease that
lets one chain write a repository at a time and marks a reindex pending, the chain's restarts,
the vectors each space still owes (stage progress) and whether the collections match the
catalog. A repository's row in ``repos`` is changed only through ``coderag.store.repos``."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from coderag.store import repos
from coderag.store.database import Database, Tx

RENEW = "UPDATE chains SET lease_until=:until WHERE repo=:name AND lease_owner=:token"
"""Extend chain ``lease_owner``'s lease (its heartbeat runs it on a connection of its own)."""

_UPSERT = (
    "INSERT INTO chains (repo, {cols}) VALUES (:name, {marks}) "
    "ON CONFLICT (repo) DO UPDATE SET {sets}"
)


@dataclass(frozen=True)
class Unfinished:
    """A repository mid-chain: its lease's end (None: none), the chain's restarts so far and
    its last progress note."""

    name: str
    lease_until: float | None
    attempts: int
    progress: str | None


def _set(conn: Tx, name: str, **values: object) -> None:
    """Set columns of the repository's chain row, made when it has none."""
    cols = list(values)
    conn.execute(
        _UPSERT.format(
            cols=", ".join(cols),
            marks=", ".join(f":{c}" for c in cols),
            sets=", ".join(f"{c}=excluded.{c}" for c in cols),
        ),
        {"name": name, **values},
    )


def held(conn: Tx, name: str, now: float) -> bool:
    """Whether a live chain holds the repository's lease at ``now``."""
    row = conn.execute(
        "SELECT lease_owner, lease_until FROM chains WHERE repo=:name", {"name": name}
    ).fetchone()
    return row is not None and bool(row[0]) and (row[1] or 0) > now


class ChainRows:
    """The ``chains`` table (``catalog.chains``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def claim(self, name: str, token: str, now: float, until: float) -> str | None:
        """Give the lease to ``token`` unless a live one holds it (then mark a reindex
        pending); the token, or None (also for a repository that is gone)."""

        def txn(conn: Tx) -> str | None:
            if not repos.exists(conn, name):
                return None
            row = conn.execute(
                "SELECT lease_until FROM chains WHERE repo=:name", {"name": name}
            ).fetchone()
            if row is not None and row[0] is not None and row[0] > now:
                conn.execute("UPDATE chains SET pending=1 WHERE repo=:name", {"name": name})
                return None
            _set(conn, name, lease_owner=token, lease_until=until, pending=0)
            return token

        return self._db.write(txn)

    def renew(self, name: str, token: str, until: float) -> bool:
        """Extend chain ``token``'s lease; False when another chain holds it."""
        params = {"until": until, "name": name, "token": token}
        return bool(self._db.write(lambda conn: conn.execute(RENEW, params).rowcount))

    def beat(self, name: str, token: str, until: float) -> None:
        """Extend the lease on a heartbeat's own connection (never behind this process's
        writes)."""
        params = {"until": until, "name": name, "token": token}
        self._db.write_now(lambda conn: conn.execute(RENEW, params))

    def release(self, name: str, token: str) -> None:
        """Let the lease of chain ``token`` run out now."""
        self._db.write(
            lambda conn: conn.execute(
                "UPDATE chains SET lease_until=NULL WHERE repo=:name AND lease_owner=:token",
                {"name": name, "token": token},
            )
        )

    def finish(self, name: str, token: str | None) -> bool:
        """End chain ``token`` and its retry count; whether a reindex was pending (False when
        another chain holds the row)."""

        def txn(conn: Tx) -> bool:
            row = conn.execute(
                "SELECT pending, lease_owner FROM chains WHERE repo=:name", {"name": name}
            ).fetchone()
            if row is None or (token is not None and row[1] not in (None, token)):
                return False
            conn.execute(
                "UPDATE chains SET lease_owner=NULL, lease_until=NULL, pending=0, attempts=0 "
                "WHERE repo=:name",
                {"name": name},
            )
            return bool(row[0])

        return self._db.write(txn)

    def unfinished(self, states: tuple[str, ...]) -> list[Unfinished]:
        """Repositories mid-chain: in one of ``states``, or ready but still owing vectors
        (coderag.chain)."""
        rows = self._db.read(
            "SELECT r.name, c.lease_until, c.attempts, r.progress FROM repos r "
            "LEFT JOIN chains c ON c.repo = r.name "
            "WHERE r.status IN :states OR (r.status='ready' AND r.complete=0) ORDER BY r.name",
            {"states": list(states)},
        )
        return [Unfinished(r[0], r[1], r[2] or 0, r[3]) for r in rows]

    def set_attempts(self, name: str, attempts: int) -> None:
        """Record a chain started again after it died (its lease let go at once)."""

        def write(conn: Tx) -> None:
            if repos.exists(conn, name):
                _set(conn, name, attempts=attempts, lease_until=None)

        self._db.write(write)

    def give_up(self, name: str, error: str) -> None:
        """A chain that died too often: the repository fails with ``error``, its restarts
        forgotten."""

        def write(conn: Tx) -> None:
            conn.execute(
                "UPDATE chains SET attempts=0, lease_until=NULL WHERE repo=:name", {"name": name}
            )
            repos.set_failed(conn, name, error)

        self._db.write(write)

    def publish_keywords(
        self, name: str, registration: str, files: int, units: int, owed: dict[str, Any]
    ) -> bool:
        """Mark the registration's new units searchable (status ready, a new generation) with
        the vectors it still owes per space; False when the repository or registration is
        gone."""

        def publish(conn: Tx) -> bool:
            if not repos.publish_keywords(conn, name, registration, files, units):
                return False
            _set(conn, name, stages=json.dumps(owed))
            return True

        return self._db.write(publish)

    def publish_complete(
        self, name: str, registration: str, files: int, units: int, commit: str | None
    ) -> bool:
        """The last stage: the registration's index complete at ``commit`` (a new generation),
        nothing owed; False when the repository or registration is gone."""

        def publish(conn: Tx) -> bool:
            if not repos.publish_complete(conn, name, registration, files, units, commit):
                return False
            _set(conn, name, stages="{}")
            return True

        return self._db.write(publish)

    def advance(self, name: str, space: str, done: int, total: int) -> None:
        """Record that ``done`` of the ``total`` vectors a space owes are written."""

        def write(conn: Tx) -> None:
            if not repos.exists(conn, name):
                return
            row = conn.execute(
                "SELECT stages FROM chains WHERE repo=:name", {"name": name}
            ).fetchone()
            state = json.loads((row[0] if row else None) or "{}")
            started = (state.get(space) or {}).get("started") or time.time()
            state[space] = {"done": done, "total": total, "started": started}
            _set(conn, name, stages=json.dumps(state))

        self._db.write(write)

    def open_vector_chain(self, name: str, token: str | None) -> None:
        """At the start of chain ``token``, before it changes any unit: the chain may write only
        the vectors of what it changes when the last chain left the collections matching the
        catalog (marked ``clean``); otherwise (a chain that died, a first index) its embed stage
        compares every vector with the catalog. A chain without a token (a job queued by an
        older version) clears the mark: ``'chain:' || NULL`` is NULL."""

        def write(conn: Tx) -> None:
            conn.execute(
                "UPDATE chains SET vectors_mark = CASE WHEN vectors_mark LIKE 'clean:%' "
                "THEN 'chain:' || :token || substr(vectors_mark, 6) ELSE NULL END "
                "WHERE repo=:name",
                {"token": token, "name": name},
            )

        self._db.write(write)

    def vectors_follow_chain(self, name: str, token: str | None, encoders: str) -> bool:
        """Whether chain ``token`` started from collections that matched the catalog, written by
        these ``encoders`` (their names, joined), so writing the vectors of its own changes
        keeps them matching."""
        if not token:
            return False
        rows = self._db.read("SELECT vectors_mark FROM chains WHERE repo=:name", {"name": name})
        return bool(rows) and rows[0]["vectors_mark"] == f"chain:{token}:{encoders}"

    def mark_vectors_clean(self, name: str, registration: str, encoders: str) -> None:
        """Record that the registration's collections match the catalog, as these ``encoders``
        wrote them."""

        def write(conn: Tx) -> None:
            if repos.is_registration(conn, name, registration):
                _set(conn, name, vectors_mark=f"clean:{encoders}")

        self._db.write(write)
