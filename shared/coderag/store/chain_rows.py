"""An indexing chain's rows on the repository table (the policy is ``coderag.chain``; this is
its SQL): the lease that lets one chain write a repository at a time and marks a reindex pending,
the stages it has published, the vectors each space still owes and whether the collections match
the catalog."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from coderag.store.database import Database, Tx
from coderag.store.repos import now_iso

RENEW = "UPDATE repos SET lease_until=:until WHERE name=:name AND lease_owner=:token"
"""Extend chain ``lease_owner``'s lease (its heartbeat runs it on a connection of its own)."""


@dataclass(frozen=True)
class Unfinished:
    """A repository mid-chain: its lease's end (None: none), the chain's restarts so far and
    its last progress note."""

    name: str
    lease_until: float | None
    attempts: int
    progress: str | None


class ChainRows:
    """The chain's lease, stages and vectors mark (``catalog.chains``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def claim(self, name: str, token: str, now: float, until: float) -> str | None:
        """Give the lease to ``token`` unless a live one holds it (then mark a reindex
        pending); the token, or None."""

        def txn(conn: Tx) -> str | None:
            row = conn.execute(
                "SELECT lease_until FROM repos WHERE name=:name", {"name": name}
            ).fetchone()
            if row is None:
                return None
            if row[0] is not None and row[0] > now:
                conn.execute("UPDATE repos SET pending=1 WHERE name=:name", {"name": name})
                return None
            conn.execute(
                "UPDATE repos SET lease_owner=:token, lease_until=:until, pending=0 "
                "WHERE name=:name",
                {"token": token, "until": until, "name": name},
            )
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
                "UPDATE repos SET lease_until=NULL WHERE name=:name AND lease_owner=:token",
                {"name": name, "token": token},
            )
        )

    def finish(self, name: str, token: str | None) -> bool:
        """End chain ``token`` and its retry count; whether a reindex was pending (False when
        another chain holds the row)."""

        def txn(conn: Tx) -> bool:
            row = conn.execute(
                "SELECT pending, lease_owner FROM repos WHERE name=:name", {"name": name}
            ).fetchone()
            if row is None or (token is not None and row[1] not in (None, token)):
                return False
            conn.execute(
                "UPDATE repos SET lease_owner=NULL, lease_until=NULL, pending=0, attempts=0 "
                "WHERE name=:name",
                {"name": name},
            )
            return bool(row[0])

        return self._db.write(txn)

    def unfinished(self, states: tuple[str, ...]) -> list[Unfinished]:
        """Repositories mid-chain: in one of ``states``, or ready but still owing vectors
        (coderag.chain)."""
        rows = self._db.read(
            "SELECT name, lease_until, attempts, progress FROM repos "
            "WHERE status IN :states OR (status='ready' AND complete=0)",
            {"states": list(states)},
        )
        return [Unfinished(r[0], r[1], r[2] or 0, r[3]) for r in rows]

    def set_attempts(self, name: str, attempts: int) -> None:
        """Record a chain started again after it died (its lease let go at once)."""
        self._db.write(
            lambda conn: conn.execute(
                "UPDATE repos SET attempts=:attempts, lease_until=NULL WHERE name=:name",
                {"attempts": attempts, "name": name},
            )
        )

    def give_up(self, name: str, error: str) -> None:
        """A chain that died too often: the repository fails with ``error``, its restarts
        forgotten."""
        self._db.write(
            lambda conn: conn.execute(
                "UPDATE repos SET status='error', error=:error, attempts=0, lease_until=NULL "
                "WHERE name=:name",
                {"error": error, "name": name},
            )
        )

    def publish_keywords(
        self, name: str, registration: str, files: int, units: int, owed: dict[str, Any]
    ) -> bool:
        """Mark the registration's new units searchable (status ready, a new generation) with
        the vectors it still owes per space; False when the repository or registration is
        gone."""

        def publish(conn: Tx) -> int:
            return conn.execute(
                "UPDATE repos SET status='ready', files=:files, units=:units, complete=0, "
                "stages=:stages, searchable_at=:now, generation=generation+1 "
                "WHERE name=:name AND COALESCE(uid, '')=:registration",
                {"files": files, "units": units, "stages": json.dumps(owed), "now": now_iso(),
                 "name": name, "registration": registration},
            ).rowcount  # fmt: skip

        return bool(self._db.write(publish))

    def publish_complete(
        self, name: str, registration: str, files: int, units: int, commit: str | None
    ) -> bool:
        """The last stage: the registration's index complete at ``commit`` (a new generation);
        False when the repository or registration is gone."""

        def publish(conn: Tx) -> int:
            return conn.execute(
                "UPDATE repos SET status='ready', files=:files, units=:units, commit_sha=:commit, "
                "indexed_at=:now, progress=NULL, error=NULL, complete=1, stages='{}', "
                "generation=generation+1 WHERE name=:name AND COALESCE(uid, '')=:registration",
                {"files": files, "units": units, "commit": commit, "now": now_iso(),
                 "name": name, "registration": registration},
            ).rowcount  # fmt: skip

        return bool(self._db.write(publish))

    def advance(self, name: str, space: str, done: int, total: int) -> None:
        """Record that ``done`` of the ``total`` vectors a space owes are written."""

        def write(conn: Tx) -> None:
            row = conn.execute(
                "SELECT stages FROM repos WHERE name=:name", {"name": name}
            ).fetchone()
            if row is None:
                return
            state = json.loads(row[0] or "{}")
            started = (state.get(space) or {}).get("started") or time.time()
            state[space] = {"done": done, "total": total, "started": started}
            conn.execute(
                "UPDATE repos SET stages=:stages WHERE name=:name",
                {"stages": json.dumps(state), "name": name},
            )

        self._db.write(write)

    def open_vector_chain(self, name: str, token: str | None) -> None:
        """At the start of chain ``token``, before it changes any unit: the chain may write only
        the vectors of what it changes when the last chain left the collections matching the
        catalog (marked ``clean``); otherwise (a chain that died, a first index) its embed stage
        compares every vector with the catalog. A chain without a token (a job queued by an
        older version) clears the mark: ``'chain:' || NULL`` is NULL."""

        def write(conn: Tx) -> None:
            conn.execute(
                "UPDATE repos SET vectors_mark = CASE WHEN vectors_mark LIKE 'clean:%' "
                "THEN 'chain:' || :token || substr(vectors_mark, 6) ELSE NULL END "
                "WHERE name=:name",
                {"token": token, "name": name},
            )

        self._db.write(write)

    def vectors_follow_chain(self, name: str, token: str | None, encoders: str) -> bool:
        """Whether chain ``token`` started from collections that matched the catalog, written by
        these ``encoders`` (their names, joined), so writing the vectors of its own changes
        keeps them matching."""
        if not token:
            return False
        rows = self._db.read("SELECT vectors_mark FROM repos WHERE name=:name", {"name": name})
        return bool(rows) and rows[0]["vectors_mark"] == f"chain:{token}:{encoders}"

    def mark_vectors_clean(self, name: str, registration: str, encoders: str) -> None:
        """Record that the registration's collections match the catalog, as these ``encoders``
        wrote them."""

        def write(conn: Tx) -> None:
            conn.execute(
                "UPDATE repos SET vectors_mark=:mark WHERE name=:name "
                "AND COALESCE(uid, '')=:registration",
                {"mark": f"clean:{encoders}", "name": name, "registration": registration},
            )

        self._db.write(write)
