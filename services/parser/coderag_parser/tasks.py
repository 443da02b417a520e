"""Parser jobs: find what changed, parse it, hand units to the embedder.

What changed comes from git when the repository was indexed at a known commit (the diff from that
commit to HEAD with renames, plus files dirty now or dirty at the last index), else from a walk of
the whole tree; either way a candidate is parsed only when its content hash differs from the
indexed one, so the index after any sequence of updates equals a full index of the same tree.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from coderag import chain
from coderag.chain import Stage
from coderag.errors import Forbidden, InvalidInput, NotFound
from coderag.jobs import EmbedFiles, IndexRepo, Parsed, Skipped, handles
from coderag.settings import Settings
from coderag.store import Catalog, refs
from coderag.store.repo_fields import RepoFields
from coderag.store.repos import Repo
from coderag_parser import gitsync, origins
from coderag_parser.file_rows import FileJob, FileRows, SkippedFile
from coderag_parser.files import excluded, indexable, regular_file, walk
from coderag_parser.parsing import BlameJob, UnitSpan, blame_all, parse_all

FULL_WALK_TRIGGERS = (".gitignore",)
"""A change to one of these files can change what is indexed anywhere: walk the whole tree."""


@dataclass(frozen=True)
class IndexChange:
    """What one parse changed in a repository's index."""

    paths: list[str]
    """Files whose rows were written (new or changed content), in path order."""
    dropped: set[str]
    """Files whose rows were removed (gone, no longer indexable, or skipped now)."""
    stale_ids: set[str]
    """Units that no longer exist (their vectors are the embedder's to delete)."""
    commit: str | None
    """The commit indexed (None: not a git repository)."""
    full_walk: bool
    """Whether the whole tree was walked rather than git's diff read."""
    root: Path
    """The directory indexed."""


def _candidates(
    root: Path, last: str | None, dirty_before: set[str], extra: list[str], known: set[str]
) -> tuple[dict[str, str], set[str], dict[str, str] | None, set[str]]:
    """(path -> language to read, paths to drop, path -> skip reason of a full walk, dirty
    now)."""
    diff = gitsync.changed_paths(root, last) if last else None
    if diff is not None and not any(p.endswith(FULL_WALK_TRIGGERS) for p in diff[0] | diff[1]):
        changed, dirty = diff
        to_read: dict[str, str] = {}
        drop: set[str] = set()
        for rel in changed | dirty | dirty_before:
            lang = indexable(rel)
            if lang and regular_file(root, rel) and not excluded(root, rel, extra):
                to_read[rel] = lang
            elif rel in known:
                drop.add(rel)
        return to_read, drop, None, dirty
    skipped: dict[str, str] = {}
    to_read = {}
    for rel in walk(root, extra):
        lang = indexable(rel)
        if lang is None:
            skipped[rel] = "unsupported_type"
        else:
            to_read[rel] = lang
    return to_read, known - set(to_read), skipped, gitsync.work_tree_dirty(root)


@handles(IndexRepo)
def index_repo(job: IndexRepo) -> Parsed | Skipped:
    """Bring a repository's index up to date with its work tree (or clone), then embed."""
    return chain.run(job, _parse, first=True)


def _parse(stage: Stage) -> Parsed:
    catalog, settings, name, reg = stage.catalog, stage.settings, stage.repo, stage.registration
    repo = catalog.get_repo(name)
    if repo.ref_of and repo.commit is None and refs.fork(catalog, repo.ref_of, name):
        repo = catalog.get_repo(name)  # now at the repository's commit: only what differs is read
    catalog.chains.open_vector_chain(name, stage.token)
    fields: RepoFields = {"error": None, "progress": "walking"}
    if repo.status != "ready":
        fields["status"] = "indexing"
    with stage.renewing(), _drop_clone_on_failure(catalog, settings, repo):
        change = _index(catalog, settings, repo, reg, fields)
        if not chain.publish_keywords(catalog, name, reg, settings):
            raise NotFound(f"repository {name!r} was deleted while it was parsed")
        _blame(catalog, settings, name, reg, change.root)
    stale_ids = sorted(change.stale_ids)
    stage.next(
        EmbedFiles(
            repo=name,
            registration=reg,
            lease=stage.token,
            files=change.paths,
            stale_ids=stale_ids,
            commit=change.commit,
        )
    )
    return Parsed(
        repo=name,
        files=change.paths,
        removed=sorted(change.dropped),
        stale_ids=stale_ids,
        commit=change.commit,
        full_walk=change.full_walk,
    )


@contextmanager
def _drop_clone_on_failure(catalog: Catalog, settings: Settings, repo: Repo) -> Iterator[None]:
    """A ref that fails before it was ever searchable leaves no clone behind (a retry or a
    reindex clones again); a repository's own clone, or a ref's that serves an index, stays."""
    try:
        yield
    except Exception:
        if repo.ref_of and catalog.published(repo.name)[0] <= 0:
            shutil.rmtree(settings.data_dir / gitsync.CLONES_DIR / repo.name, ignore_errors=True)
        raise


def recheck(repo: Repo, settings: Settings) -> Repo:
    """``repo`` with its path resolved again, after checking its path and URL against this
    worker's own allow-lists (``CODERAG_REPO_ROOTS``, ``CODERAG_URL_SCHEMES``,
    ``CODERAG_URL_HOSTS``): a row is only as trustworthy as whoever could write the database,
    and a symlink checked at registration may point elsewhere now. Forbidden outside them,
    InvalidInput for a path that is gone."""
    try:
        path = origins.check_path(repo.path, settings) if repo.path else None
        if repo.url:
            origins.check_url(repo.url, settings)
    except Forbidden as exc:
        raise Forbidden(f"this worker refuses to index {repo.name!r}: {exc}") from exc
    except InvalidInput as exc:
        raise InvalidInput(f"cannot index {repo.name!r}: {exc}") from exc
    return dataclasses.replace(repo, path=path) if path else repo


def _index(
    catalog: Catalog, settings: Settings, repo: Repo, reg: str, fields: RepoFields
) -> IndexChange:
    """Parse what changed and record it (the repository's row first set to ``fields``)."""
    name = repo.name
    catalog.update_repo(name, reg, **fields)
    repo = recheck(repo, settings)
    gitsync.prune(settings.data_dir, catalog.names())
    root = gitsync.checkout(repo, settings.data_dir)
    commit = gitsync.head_commit(root)
    extra = [p.strip() for p in settings.exclude.split(",") if p.strip()]
    known = catalog.file_shas(name)
    last = repo.commit if repo.status != "error" else None
    to_read, drop, skipped, dirty = _candidates(
        root, last, catalog.dirty_files(name), extra, set(known)
    )
    jobs = [
        FileJob(name, str(root), p, lang, settings.max_file_bytes, settings.deprecated_markers)
        for p, lang in sorted(to_read.items())
    ]
    results = parse_all(jobs, settings.workers(), name)
    changed = [r for r in results if isinstance(r, FileRows) and known.get(r.path) != r.file.sha]
    left_out = {r.path: r.reason for r in results if isinstance(r, SkippedFile)}
    drop |= {p for p in left_out if p in known}
    units = [u for r in changed for u in r.units]
    paths = [r.path for r in changed]
    old_ids = {u.id for u in catalog.units(name, paths)}
    catalog.replace_files(
        name,
        [r.file for r in changed],
        units,
        symbols=[s for r in changed for s in r.symbols],
        calls=[c for r in changed for c in r.calls],
        imports=[i for r in changed for i in r.imports],
        registration=reg,
        blamed=commit is None,
    )
    removed = catalog.remove_files(name, sorted(drop), registration=reg)
    stale = (old_ids - {u.id for u in units}) | set(removed)
    catalog.set_history(name, gitsync.recent_commits(root, settings.history_days), reg)
    considered = None if skipped is not None else set(to_read) | drop
    catalog.set_skipped(name, {**(skipped or {}), **left_out}, considered, reg)
    catalog.update_repo(name, reg, dirty=dirty)
    return IndexChange(paths, drop, stale, commit, skipped is not None, root)


def _blame(catalog: Catalog, settings: Settings, name: str, reg: str, root: Path) -> None:
    """Record the last commit of every unit of the files that owe it (this parse's, or an
    interrupted job's), after the keyword stage is published and before vectors are written."""
    paths = catalog.unblamed_files(name)
    if not paths:
        return
    catalog.update_repo(name, reg, progress="blaming")
    spans: dict[str, list[UnitSpan]] = {p: [] for p in paths}
    for u in catalog.units(name, paths):
        spans[u.file].append(UnitSpan(u.id, u.start_line, u.end_line))
    jobs = [BlameJob(str(root), p, spans[p]) for p in paths]
    rows = blame_all(jobs, settings.workers(), name)
    catalog.set_blame(name, paths, rows, registration=reg)
