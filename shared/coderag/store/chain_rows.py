"""An indexing chain's rows on the repository table (the policy is ``coderag.chain``; this is
its SQL): the lease that lets one chain write a repository at a time and marks a reindex pending,
the stages it has published, the vectors each space still owes and whether the collections match
the catalog."""

from __future__ import annotations

import json
import time
from typing import Any

from coderag.store.catalog import now_iso
from coderag.store.database import Database, Row, Tx

RENEW = "UPDATE repos SET lease_until=:until WHERE name=:name AND lease_owner=:token"
"""Extend chain ``lease_owner``'s lease (its heartbeat runs it on a connection of its own)."""


def claim(db: Database, name: str, token: str, now: float, until: float) -> str | None:
    """Give the lease to ``token`` unless a live one holds it (then mark a reindex pending);
    the token, or None."""

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
            "UPDATE repos SET lease_owner=:token, lease_until=:until, pending=0 WHERE name=:name",
            {"token": token, "until": until, "name": name},
        )
        return token

    return db.write(txn)


def renew(db: Database, name: str, token: str, until: float) -> bool:
    """Extend chain ``token``'s lease; False when another chain holds it."""
    params = {"until": until, "name": name, "token": token}
    return bool(db.write(lambda conn: conn.execute(RENEW, params).rowcount))


def beat(db: Database, name: str, token: str, until: float) -> None:
    """Extend the lease on a heartbeat's own connection (never behind this process's writes)."""
    params = {"until": until, "name": name, "token": token}
    db.write_now(lambda conn: conn.execute(RENEW, params))


def release(db: Database, name: str, token: str) -> None:
    """Let the lease of chain ``token`` run out now."""
    db.write(
        lambda conn: conn.execute(
            "UPDATE repos SET lease_until=NULL WHERE name=:name AND lease_owner=:token",
            {"name": name, "token": token},
        )
    )


def finish(db: Database, name: str, token: str | None) -> bool:
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

    return db.write(txn)


def unfinished(db: Database, states: tuple[str, ...]) -> list[Row]:
    """Repositories mid-chain: in one of ``states``, or ready but still owing vectors
    (coderag.chain); name, lease_until, attempts, progress."""
    return db.read(
        "SELECT name, lease_until, attempts, progress FROM repos "
        "WHERE status IN :states OR (status='ready' AND complete=0)",
        {"states": list(states)},
    )


def publish_keywords(
    db: Database, name: str, registration: str, files: int, units: int, owed: dict[str, Any]
) -> bool:
    """Mark the registration's new units searchable (status ready, a new generation) with the
    vectors it still owes per space; False when the repository or registration is gone."""

    def publish(conn: Tx) -> int:
        return conn.execute(
            "UPDATE repos SET status='ready', files=:files, units=:units, complete=0, "
            "stages=:stages, searchable_at=:now, generation=generation+1 "
            "WHERE name=:name AND COALESCE(uid, '')=:registration",
            {"files": files, "units": units, "stages": json.dumps(owed), "now": now_iso(),
             "name": name, "registration": registration},
        ).rowcount  # fmt: skip

    return bool(db.write(publish))


def publish_complete(
    db: Database, name: str, registration: str, files: int, units: int, commit: str | None
) -> bool:
    """The last stage: the registration's index complete at ``commit`` (a new generation);
    False when the repository or registration is gone."""

    def publish(conn: Tx) -> int:
        return conn.execute(
            "UPDATE repos SET status='ready', files=:files, units=:units, commit_sha=:commit, "
            "indexed_at=:now, progress=NULL, error=NULL, complete=1, stages='{}', "
            "generation=generation+1 WHERE name=:name AND COALESCE(uid, '')=:registration",
            {"files": files, "units": units, "commit": commit, "now": now_iso(), "name": name,
             "registration": registration},
        ).rowcount  # fmt: skip

    return bool(db.write(publish))


def dirty_files(db: Database, name: str) -> set[str]:
    """Paths that changed in the working tree since the last index (recorded by reindex)."""
    rows = db.read("SELECT dirty FROM repos WHERE name=:name", {"name": name})
    return set(json.loads(rows[0]["dirty"] or "[]")) if rows else set()


def advance(db: Database, name: str, space: str, done: int, total: int) -> None:
    """Record that ``done`` of the ``total`` vectors a space owes are written."""

    def write(conn: Tx) -> None:
        row = conn.execute("SELECT stages FROM repos WHERE name=:name", {"name": name}).fetchone()
        if row is None:
            return
        state = json.loads(row[0] or "{}")
        started = (state.get(space) or {}).get("started") or time.time()
        state[space] = {"done": done, "total": total, "started": started}
        conn.execute(
            "UPDATE repos SET stages=:stages WHERE name=:name",
            {"stages": json.dumps(state), "name": name},
        )

    db.write(write)


def open_vector_chain(db: Database, name: str, token: str | None) -> None:
    """At the start of chain ``token``, before it changes any unit: the chain may write only
    the vectors of what it changes when the last chain left the collections matching the
    catalog (marked ``clean``); otherwise (a chain that died, a first index) its embed stage
    compares every vector with the catalog. A chain without a token (a job queued by an older
    version) clears the mark: ``'chain:' || NULL`` is NULL."""

    def write(conn: Tx) -> None:
        conn.execute(
            "UPDATE repos SET vectors_mark = CASE WHEN vectors_mark LIKE 'clean:%' "
            "THEN 'chain:' || :token || substr(vectors_mark, 6) ELSE NULL END WHERE name=:name",
            {"token": token, "name": name},
        )

    db.write(write)


def vectors_follow_chain(db: Database, name: str, token: str | None, encoders: str) -> bool:
    """Whether chain ``token`` started from collections that matched the catalog, written by
    these ``encoders`` (their names, joined), so writing the vectors of its own changes keeps
    them matching."""
    if not token:
        return False
    rows = db.read("SELECT vectors_mark FROM repos WHERE name=:name", {"name": name})
    return bool(rows) and rows[0]["vectors_mark"] == f"chain:{token}:{encoders}"


def mark_vectors_clean(db: Database, name: str, registration: str, encoders: str) -> None:
    """Record that the registration's collections match the catalog, as these ``encoders``
    wrote them."""

    def write(conn: Tx) -> None:
        conn.execute(
            "UPDATE repos SET vectors_mark=:mark WHERE name=:name "
            "AND COALESCE(uid, '')=:registration",
            {"mark": f"clean:{encoders}", "name": name, "registration": registration},
        )

    db.write(write)
