"""One benchmark corpus as the retrieval benchmark and the ranker's training rows both use it:
its questions, its index, and whether a hit overlaps one of its gold ranges.

Its own module so that ``bench/retrieval.py`` and ``bench/ranker_rows.py`` share it without
importing each other. Importing it sets no data directory: the script that runs it does
(``bench/retrieval.py`` sets ``CODERAG_DATA_DIR`` before its imports).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench.fetch import corpus_root
from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.store import get_catalog, get_vectors
from coderag_app.server import load_jobs

HERE = Path(__file__).resolve().parent


def load_questions(name: str) -> list[dict]:
    """The questions of one corpus."""
    path = HERE / "questions" / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def overlaps(hit: tuple[str, int, int], gold: dict) -> bool:
    """Whether a (file, start, end) result overlaps a gold range."""
    f, s, e = hit
    return f == gold["file"] and s <= gold["end_line"] and gold["start_line"] <= e


def index_corpus(corpus: dict, reuse: bool, root: Path | None = None) -> tuple[float, bool]:
    """Register and index one corpus (or keep an earlier run's index); (seconds, reused)."""
    name, root = corpus["name"], root or corpus_root(corpus["name"])
    catalog = get_catalog()
    try:
        repo = catalog.get_repo(name)
    except Exception:
        repo = None
    # complete, not just ready: a run stopped mid-index leaves its vectors half written
    if reuse and repo is not None and repo.complete and repo.path == str(root):
        return 0.0, True
    if repo is not None:
        catalog.delete_repo(name)
    get_vectors().drop(name)
    catalog.create_repo(name, str(root), None, None)
    t = time.perf_counter()
    load_jobs()  # this process runs every stage of the chain
    run_now(IndexRepo(repo=name))
    return time.perf_counter() - t, False
