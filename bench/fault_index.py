"""What an index holds, for the fault bench: a fingerprint of a repository's index that two
indexes of the same tree share whatever their names, and what differs between two."""

from __future__ import annotations

from coderag.store import get_catalog, get_vectors
from coderag.store.vectors import SPACE_PREFIXES
from harness.snapshot import snapshot


def fingerprint(name: str) -> dict:
    """What the index holds for a repository, keyed without its name: units (content hashes),
    files, symbols, calls, imports, and per vector space unit -> the hash its vector carries."""
    try:
        rows: dict = snapshot(name)
    except AssertionError as exc:  # vector ids that are not the unit ids: the maps below say how
        rows = {"snapshot": str(exc)}
    key = {u.id: (u.file, u.start_line, u.end_line, u.symbol) for u in get_catalog().units(name)}
    for space in SPACE_PREFIXES:
        stored = get_vectors().hashes(name, space)
        rows[space] = {key.get(i, ("not a unit", i, 0, "")): h for i, h in stored.items()}
    return rows


def differences(got: dict, ref: dict) -> str:
    """What differs between two fingerprints, briefly ('' when equal)."""
    out = []
    for part in sorted(got.keys() | ref.keys()):
        a, b = got.get(part), ref.get(part)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            stale = sum(a[k] != b[k] for k in a.keys() & b.keys())
            out.append(f"{part}: {len(b.keys() - a.keys())} missing, "
                       f"{len(a.keys() - b.keys())} extra, {stale} stale")  # fmt: skip
        else:
            out.append(f"{part}: {len(a or ())} rows, a full index has {len(b or ())}")
    return "; ".join(out)


def empty_vector_cache() -> None:
    """Forget every cached vector, so the next index encodes from scratch like a first one."""
    get_catalog().embed_cache.clear()
