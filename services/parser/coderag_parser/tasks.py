"""Parser jobs (JSON in, JSON out): walk a repository, parse what changed, hand units to the
embedder."""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from coderag import progress
from coderag.errors import NotFound
from coderag.queue import enqueue
from coderag.settings import get_settings
from coderag.store import get_catalog

from coderag_parser import gitsync
from coderag_parser.files import Skipped, indexable, read_source, walk
from coderag_parser.units import extract_units

log = logging.getLogger(__name__)

POOL_MIN_FILES = 64
"""Below this many changed files, parsing runs in this process (a pool costs ~1 s to start)."""

EMBED_JOB = "coderag_embedder.tasks.embed_files"
"""Job that embeds the units of changed files."""


def parse_file(args: tuple[str, str, str, str, int]) -> dict[str, Any]:
    """Parse one file: (repo, root, path, language, max_bytes) -> its row and units, or a skip."""
    repo, root, path, language, max_bytes = args
    text, reason = read_source(Path(root) / path, max_bytes)
    if text is None:
        return {"path": path, "skip": reason}
    sha = hashlib.sha1(text.encode("utf-8")).hexdigest()
    units = extract_units(repo, path, language, text)
    return {
        "path": path,
        "language": language,
        "lines": text.count("\n") + 1,
        "sha": sha,
        "units": [u.model_dump() for u in units],
    }


def _parse_all(jobs: list[tuple[str, str, str, str, int]], workers: int, repo: str) -> list[dict]:
    results: list[dict] = []
    if len(jobs) < POOL_MIN_FILES or workers <= 1:
        for i, job in enumerate(jobs, 1):
            results.append(parse_file(job))
            progress.report(repo, "parsing", i, len(jobs))
        return results
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for i, res in enumerate(pool.map(parse_file, jobs, chunksize=16), 1):
            results.append(res)
            progress.report(repo, "parsing", i, len(jobs))
    return results


def index_repo(payload: dict[str, Any]) -> dict[str, Any]:
    """Bring a repository's files and units up to date with its working tree, then embed."""
    from coderag.schemas import Unit

    name = payload["repo"]
    settings = get_settings()
    catalog = get_catalog()
    try:
        repo = catalog.get_repo(name)
    except NotFound:
        return {"repo": name, "skipped": "deleted"}
    fields: dict[str, Any] = {"error": None, "progress": "walking"}
    if repo.status != "ready":
        fields["status"] = "indexing"
    catalog.update_repo(name, **fields)
    try:
        root = gitsync.checkout(repo, settings.data_dir)
        commit = gitsync.head_commit(root)
        extra = [p.strip() for p in settings.exclude.split(",") if p.strip()]
        skipped = Skipped()
        on_disk: dict[str, str] = {}
        for rel in walk(root, extra):
            lang = indexable(rel)
            if lang is None:
                skipped.add("unsupported_type")
            else:
                on_disk[rel] = lang
        known = catalog.file_shas(name)
        jobs = [(name, str(root), p, lang, settings.max_file_bytes) for p, lang in on_disk.items()]
        results = _parse_all(jobs, settings.workers(), name)
        changed_rows, changed_units, keep = [], [], set()
        for res in results:
            if "skip" in res:
                skipped.add(res["skip"])
                continue
            keep.add(res["path"])
            if known.get(res["path"]) == res["sha"]:
                continue
            changed_rows.append((res["path"], res["language"], res["lines"], res["sha"]))
            changed_units += [Unit(**u) for u in res["units"]]
        changed = [row[0] for row in changed_rows]
        old_ids = {u.id for u in catalog.units(name, changed)}
        catalog.replace_files(name, changed_rows, changed_units)
        stale = old_ids - {u.id for u in changed_units}
        stale |= set(catalog.remove_files(name, [p for p in known if p not in keep]))
        catalog.update_repo(name, skipped=skipped.total)
    except NotFound:
        return {"repo": name, "skipped": "deleted"}
    except Exception as exc:
        log.exception("indexing %s failed", name)
        catalog.update_repo(name, status="error", error=f"{type(exc).__name__}: {exc}")
        raise
    out = {
        "repo": name,
        "files": changed,
        "stale_ids": sorted(stale),
        "commit": commit,
        "skipped": skipped.reasons,
    }
    enqueue(EMBED_JOB, out)
    return out
