"""What the index holds for a repository, comparable across runs (tests and the fault bench)."""

from __future__ import annotations

from coderag.store import get_catalog, get_vectors
from coderag_embedder.encoder import get_encoders


def snapshot(repo: str) -> dict:
    """Everything the index holds for a repository, without the repository's name."""
    cat = get_catalog()
    units = cat.units(repo)
    key = {u.id: (u.file, u.start_line, u.symbol) for u in units}
    rows = {
        "units": sorted(
            (
                u.file,
                u.start_line,
                u.end_line,
                u.symbol,
                u.kind,
                u.content_hash,
                repr(sorted(u.facts.items())),
                u.last_commit,
            )
            for u in units
        ),
        "files": sorted(cat.file_shas(repo).items()),
        "symbols": sorted(
            (*tuple(r)[1:-1], key.get(r["unit_id"]))
            for r in cat.db.read("SELECT * FROM symbols WHERE repo=:r", {"r": repo})
        ),
        "calls": sorted(
            (r["file"], key[r["caller_id"]], r["callee"], r["line"])
            for r in cat.db.read("SELECT * FROM calls WHERE repo=:r", {"r": repo})
        ),
        "imports": sorted(
            tuple(r)
            for r in cat.db.read("SELECT file, module FROM imports WHERE repo=:r", {"r": repo})
        ),
    }
    for space in get_encoders():
        assert get_vectors().ids(repo, space) == set(key), f"{space}: one vector per unit"
    return rows
