"""Embedder jobs: encode the units of changed files (through the cache) into the vector store."""

from __future__ import annotations

from typing import Any

import numpy as np

from coderag import chain
from coderag.chain import Stage
from coderag.errors import NotFound
from coderag.jobs import Embedded, EmbedFiles, RefreshRepo, Skipped, handles
from coderag.store import get_catalog, get_vectors
from coderag.store.vectors import SPACE_PREFIXES
from coderag_embedder import cache
from coderag_embedder.encoder import get_encoders, text_key, unit_text

FILES_BY_QUERY = 64
"""Up to this many changed files are read one query each; more, and all units are read once."""

CHUNK_UNITS = 64
"""Units encoded and written per step, so progress moves, each step's vectors are searchable as
soon as they land, and memory stays flat."""


@handles(EmbedFiles)
def embed_files(job: EmbedFiles) -> Embedded | Skipped:
    """Embed the units of ``files`` and delete ``stale_ids``, then repair the collection against
    the catalog (a vector for every unit, encoding the unit's current content, nothing else);
    then refresh the retriever."""
    return chain.run(
        job, lambda stage: _embed_stage(stage, job), on_deleted=lambda reg: _drop(job, reg)
    )


def _drop(job: EmbedFiles, registration: str | None) -> None:
    """Deleted while we wrote: leave nothing."""
    get_vectors().drop(job.repo, registration=registration)


def _embed_stage(stage: Stage, job: EmbedFiles) -> Embedded:
    name, reg = stage.repo, stage.registration
    with stage.renewing():
        written, encoded = _embed_repo(name, reg, job)
    if stage.catalog.registration(name) != reg:
        raise NotFound(f"repository {name!r} was registered again")
    stage.next(RefreshRepo(repo=name, registration=reg, lease=job.lease, commit=job.commit))
    return Embedded(repo=name, vectors=written, encoded=encoded, cached=written - encoded)


def _embed_repo(name: str, reg: str, job: EmbedFiles) -> tuple[int, int]:
    """Write the vectors a stage owes; (vectors written, texts encoded)."""
    catalog, vectors = get_catalog(), get_vectors()
    commit = job.commit or ""
    encoders = get_encoders()
    changed = sorted(set(job.files))
    # A one-file push reads only that file's units. When the chain began from collections that
    # matched the catalog, and a collection's count still says so (Chroma's data was not lost),
    # that is all it owes; otherwise (a chain died, the encoders changed) every vector's content
    # hash is compared with the catalog's, so the index converges to one current vector per
    # unit after any crash.
    if len(changed) > FILES_BY_QUERY:
        wanted = set(changed)
        units = [u for u in catalog.units(name) if u.file in wanted]
    else:
        units = catalog.units(name, changed)
    fingerprint = ",".join(f"{s}={e.name}" for s, e in sorted(encoders.items()))
    own_changes_only = catalog.chains.vectors_follow_chain(name, job.lease, fingerprint)
    encoded = written = 0
    expected: dict[str, str] | None = None
    unit_count = catalog.counts(name)[1] if own_changes_only else 0
    for space, encoder in encoders.items():
        chain.advance(catalog, name, space, 0, len(units))
        encoded += _embed(name, units, commit, encoder, space, reg)
        vectors.delete(name, job.stale_ids, space, reg)
        missing: list[Any] = []
        if not own_changes_only or vectors.count(name, space, reg) != unit_count:
            expected = catalog.unit_hashes(name) if expected is None else expected
            stored = vectors.hashes(name, space, reg)
            redo = {uid for uid, h in expected.items() if stored.get(uid) != h}
            missing = list(catalog.units_by_id(redo).values())
            encoded += _embed(name, missing, commit, encoder, space, reg, len(units))
            vectors.delete(name, sorted(set(stored) - set(expected)), space, reg)
        written += len(units) + len(missing)
        chain.advance(catalog, name, space, len(units) + len(missing), len(units) + len(missing))
    for space in set(SPACE_PREFIXES) - set(encoders):
        vectors.drop(name, space, reg)  # a second encoder switched off: its vectors go stale
    catalog.chains.mark_vectors_clean(name, reg, fingerprint)
    return written, encoded


def _embed(
    name: str,
    units: list[Any],
    commit: str,
    encoder: Any,
    space: str,
    registration: str,
    before: int = 0,
) -> int:
    """Write the units' vectors, encoding only what the cache lacks, each chunk searchable as it
    lands (``before``: vectors of this space written earlier in the job); returns how many it
    encoded."""
    catalog = get_catalog()
    texts = {u.id: unit_text(u) for u in units}
    keys = {uid: text_key(t) for uid, t in texts.items()}
    known = cache.lookup(catalog, encoder.name, list(keys.values()))
    encoded = 0
    for start in range(0, len(units), CHUNK_UNITS):
        chunk = units[start : start + CHUNK_UNITS]
        todo = {keys[u.id]: texts[u.id] for u in chunk if keys[u.id] not in known}
        if todo:
            fresh = encoder.encode(list(todo.values()))
            new = dict(zip(todo, fresh, strict=True))
            cache.store(catalog, encoder.name, new)
            known.update(new)
            encoded += len(todo)
        get_vectors().upsert(
            name,
            [u.id for u in chunk],
            np.stack([known[keys[u.id]] for u in chunk]),
            [_metadata(u, commit) for u in chunk],
            space,
            registration,
        )
        if before or start + len(chunk) < len(units):
            chain.advance(catalog, name, space, before + start + len(chunk), before + len(units))
        chain.report(name, f"embedding ({space})", start + len(chunk), len(units))
    return encoded


def _metadata(u: Any, commit: str) -> dict[str, Any]:
    return {
        "file": u.file,
        "start_line": u.start_line,
        "end_line": u.end_line,
        "symbol": u.symbol,
        "kind": u.kind,
        "language": u.language,
        "is_test": u.is_test,
        "commit": commit,
        "content_hash": u.content_hash,
        "last_commit": u.last_commit or "",
        "last_author": u.last_author or "",
        "last_date": u.last_date or "",
    }
