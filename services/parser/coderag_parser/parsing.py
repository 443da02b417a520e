"""Parsing files into units, on worker processes for big batches: a file that nests too deeply,
makes the parser raise, or crashes a parser process is skipped and counted, never failing the
repository. Blame is its own pass (``blame_all``), run after the keyword stage is published:
on a long history ``git blame`` costs more than the parse, and search does not need it."""

from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import NamedTuple

from coderag import chain
from coderag.index_rows import UnitCommit
from coderag_parser import gitsync
from coderag_parser.file_rows import FileJob, FileRows, SkippedFile, parse_file

log = logging.getLogger(__name__)

POOL_MIN_FILES = 64
"""Below this many changed files, parsing runs in this process (a pool costs ~1 s to start)."""

MAX_POOL_CRASHES = 20
"""Parser processes that may die in one batch before the rest is parsed in this process."""


class UnitSpan(NamedTuple):
    """A unit's id and its first and last lines."""

    unit_id: str
    start_line: int
    end_line: int


class BlameJob(NamedTuple):
    """One file to blame: the directory indexed, the file's path in it, and its units."""

    root: str
    path: str
    spans: list[UnitSpan]


def blame_file(job: BlameJob) -> list[UnitCommit]:
    """The newest commit among each unit's committed lines (units with none are left out)."""
    root, path, spans = job
    lines = gitsync.blame(Path(root), path)
    out = []
    for uid, start, end in spans:
        if last := gitsync.newest(lines, start, end):
            out.append(UnitCommit(uid, last.commit, last.author, last.date))
    return out


def blame_all(jobs: list[BlameJob], workers: int, repo: str) -> list[UnitCommit]:
    """``blame_file`` over many files, on worker processes for a big batch (git does the work;
    a broken pool falls back to this process)."""
    rows: list[UnitCommit] = []
    if len(jobs) >= POOL_MIN_FILES and workers > 1:
        try:
            ctx = multiprocessing.get_context("forkserver")
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                for i, res in enumerate(pool.map(blame_file, jobs, chunksize=8), 1):
                    rows += res
                    chain.report(repo, "blaming", i, len(jobs))
            return rows
        except BrokenProcessPool:
            log.warning("blame pool broke; blaming %s in-process", repo)
            rows = []
    for i, job in enumerate(jobs, 1):
        rows += blame_file(job)
        chain.report(repo, "blaming", i, len(jobs))
    return rows


def parse_all(jobs: list[FileJob], workers: int, repo: str) -> list[FileRows | SkippedFile]:
    """Parse files, in order; a file that crashes a parser process is skipped as
    ``parser_crash``, the others are parsed."""
    results: list[FileRows | SkippedFile] = []
    if len(jobs) < POOL_MIN_FILES or workers <= 1:
        for i, job in enumerate(jobs, 1):
            results.append(parse_file(job))
            chain.report(repo, "parsing", i, len(jobs))
        return results
    isolating = False  # after a crash: one process, one file at a time, so the culprit is known
    for _ in range(MAX_POOL_CRASHES + 1):
        rest = jobs[len(results) :]
        try:
            _run_pool(rest, 1 if isolating else workers, results, len(jobs), repo)
            return results
        except BrokenProcessPool:
            if not results and not isolating and _pool_never_starts():
                break
            if isolating:
                log.warning("%s: %s crashed the parser; skipped", repo, rest[0].path)
                results.append(SkippedFile(rest[0].path, "parser_crash"))
            isolating = True
    log.warning("parser pool keeps breaking; parsing the rest of %s in-process", repo)
    results += [parse_file(job) for job in jobs[len(results) :]]
    return results


def _run_pool(
    jobs: list[FileJob], workers: int, out: list[FileRows | SkippedFile], total: int, repo: str
) -> None:
    """Parse on ``workers`` processes, appending each result to ``out`` as it arrives."""
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for res in pool.map(parse_file, jobs, chunksize=8 if workers > 1 else 1):
            out.append(res)
            chain.report(repo, "parsing", len(out), total)


def _pool_never_starts() -> bool:
    """Whether a pool cannot run even a trivial call (a host program without a __main__ guard):
    then parsing stays in this process."""
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")) as pool:
            pool.submit(int).result()
        return False
    except BrokenProcessPool:
        return True
