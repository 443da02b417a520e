"""Parser jobs (JSON in, JSON out): find what changed, parse it, hand units to the embedder.

What changed comes from git when the repository was indexed at a known commit (the diff from that
commit to HEAD with renames, plus files dirty now or dirty at the last index), else from a walk of
the whole tree; either way a candidate is parsed only when its content hash differs from the
indexed one, so the index after any sequence of updates equals a full index of the same tree.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from coderag import progress
from coderag.errors import NotFound
from coderag.queue import enqueue
from coderag.redact import redact
from coderag.schemas import Unit
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_parser import gitsync
from coderag_parser.files import (
    Skipped,
    excluded,
    indexable,
    read_source,
    regular_file,
    walk,
)
from coderag_parser.units import parse_source

log = logging.getLogger(__name__)

POOL_MIN_FILES = 64
"""Below this many changed files, parsing runs in this process (a pool costs ~1 s to start)."""

EMBED_JOB = "coderag_embedder.tasks.embed_files"
"""Job that embeds the units of changed files."""

FULL_WALK_TRIGGERS = (".gitignore",)
"""A change to one of these files can change what is indexed anywhere: walk the whole tree."""


def parse_file(args: tuple[str, str, str, str, int, bool, str]) -> dict[str, Any]:
    """Parse one file: (repo, root, path, language, max_bytes, blame, deprecation markers) ->
    its rows, or a skip."""
    repo, root, path, language, max_bytes, with_blame, markers = args
    text, reason = read_source(Path(root) / path, max_bytes)
    if text is None:
        return {"path": path, "skip": reason}
    text, _ = redact(text, path)  # what is parsed is what gets stored, embedded and shown
    parsed = parse_source(repo, path, language, text, markers)
    if with_blame:
        _attach_blame(parsed.units, gitsync.blame(Path(root), path))
    starts = [(u.start_line, u.end_line, u.id) for u in parsed.units]

    def unit_at(line: int) -> str | None:
        return next((uid for s, e, uid in starts if s <= line <= e), None)

    return {
        "path": path,
        "language": language,
        "lines": text.count("\n") + 1,
        "sha": hashlib.sha1(text.encode("utf-8")).hexdigest(),
        "units": [u.model_dump() for u in parsed.units],
        "symbols": [
            (
                path,
                s["name"],
                s["qualified"],
                s["kind"],
                s["start_line"],
                s["end_line"],
                unit_at(s["start_line"]),
            )
            for s in parsed.symbols
        ],
        "calls": [
            (path, c["caller"], c["callee"], c["receiver"], c["receiver_type"], c["line"])
            for c in parsed.calls
        ],
        "imports": [(path, m) for m in dict.fromkeys(parsed.imports)],
    }


def _attach_blame(units: list[Unit], lines: dict[int, tuple[str, str, str, int]]) -> None:
    """Give each unit the newest commit among its lines (uncommitted lines are skipped)."""
    for u in units:
        touched = [
            lines[n]
            for n in range(u.start_line, u.end_line + 1)
            if n in lines and set(lines[n][0]) != {"0"}
        ]
        if touched:
            u.last_commit, u.last_author, u.last_date, _ = min(touched, key=lambda t: t[3])


def _parse_all(jobs: list[tuple], workers: int, repo: str) -> list[dict]:
    results: list[dict] = []
    if len(jobs) < POOL_MIN_FILES or workers <= 1:
        for i, job in enumerate(jobs, 1):
            results.append(parse_file(job))
            progress.report(repo, "parsing", i, len(jobs))
        return results
    ctx = multiprocessing.get_context("forkserver")
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            for i, res in enumerate(pool.map(parse_file, jobs, chunksize=8), 1):
                results.append(res)
                progress.report(repo, "parsing", i, len(jobs))
    except BrokenProcessPool:
        # A worker died (out of memory, or a host program without a __main__ guard): finish here.
        log.warning(
            "parser pool broke after %d of %d files; parsing the rest in-process",
            len(results),
            len(jobs),
        )
        for job in jobs[len(results) :]:
            results.append(parse_file(job))
    return results


def _candidates(
    root: Path, last: str | None, dirty_before: set[str], extra: list[str], known: set[str]
) -> tuple[dict[str, str], set[str], Skipped | None, set[str]]:
    """(path -> language to read, paths to drop, skip counts of a full walk, dirty now)."""
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
    skipped = Skipped()
    to_read = {}
    for rel in walk(root, extra):
        lang = indexable(rel)
        if lang is None:
            skipped.add("unsupported_type")
        else:
            to_read[rel] = lang
    return to_read, known - set(to_read), skipped, gitsync.work_tree_dirty(root)


def index_repo(payload: dict[str, Any]) -> dict[str, Any]:
    """Bring a repository's index up to date with its work tree (or clone), then embed."""
    name = payload["repo"]
    settings = get_settings()
    catalog = get_catalog()
    try:
        repo = catalog.get_repo(name)
        reg = catalog.registration(name)
    except NotFound:
        return {"repo": name, "skipped": "deleted"}
    if payload.get("registration") not in (None, reg):
        return {"repo": name, "skipped": "deleted"}
    fields: dict[str, Any] = {"error": None, "progress": "walking"}
    if repo.status != "ready":
        fields["status"] = "indexing"
    try:
        catalog.update_repo(name, reg, **fields)
        root = gitsync.checkout(repo, settings.data_dir)
        commit = gitsync.head_commit(root)
        extra = [p.strip() for p in settings.exclude.split(",") if p.strip()]
        row = catalog.db.read("SELECT dirty, skipped FROM repos WHERE name=?", (name,))[0]
        known = catalog.file_shas(name)
        last = repo.commit if repo.status != "error" else None
        to_read, drop, skipped, dirty = _candidates(
            root, last, set(json.loads(row["dirty"])), extra, set(known)
        )
        blame = commit is not None
        jobs = [
            (name, str(root), p, lang, settings.max_file_bytes, blame, settings.deprecated_markers)
            for p, lang in sorted(to_read.items())
        ]
        results = _parse_all(jobs, settings.workers(), name)
        changed = [r for r in results if "skip" not in r and known.get(r["path"]) != r["sha"]]
        drop |= {r["path"] for r in results if "skip" in r and r["path"] in known}
        if skipped is not None:
            for r in results:
                if "skip" in r:
                    skipped.add(r["skip"])
        units = [Unit(**u) for r in changed for u in r["units"]]
        paths = [r["path"] for r in changed]
        old_ids = {u.id for u in catalog.units(name, paths)}
        catalog.replace_files(
            name,
            [(r["path"], r["language"], r["lines"], r["sha"]) for r in changed],
            units,
            symbols=[s for r in changed for s in r["symbols"]],
            calls=[c for r in changed for c in r["calls"]],
            imports=[i for r in changed for i in r["imports"]],
            registration=reg,
        )
        removed = catalog.remove_files(name, sorted(drop), registration=reg)
        stale = (old_ids - {u.id for u in units}) | set(removed)
        catalog.set_history(name, gitsync.recent_commits(root, settings.history_days), reg)
        update: dict[str, Any] = {"dirty": json.dumps(sorted(dirty))}
        if skipped is not None:
            update["skipped"] = skipped.total
        catalog.update_repo(name, reg, **update)
    except NotFound:
        return {"repo": name, "skipped": "deleted"}
    except Exception as exc:
        log.exception("indexing %s failed", name)
        with contextlib.suppress(NotFound):
            catalog.update_repo(name, reg, status="error", error=f"{type(exc).__name__}: {exc}")
        raise
    out = {
        "repo": name,
        "registration": reg,
        "files": paths,
        "removed": sorted(drop),
        "stale_ids": sorted(stale),
        "commit": commit,
        "full_walk": skipped is not None,
    }
    enqueue(EMBED_JOB, out)
    return out
