"""The pinned inputs the trainers read, where ``bench/`` keeps them: the code-base lists (the
benchmark splits of ``bench/corpora.json``, the mined code bases of ``bench/mining.json``, the
written program's ``bench/written/*.json``, each code base pinned by version and sha256), the
questions written about them, and the work area the benchmark's runs fill (candidate lists,
saved hits, indexes).

Training may not import ``bench`` (the package ships; the benchmarks do not), so the lists are
read here and ``bench/fetch.py``, which downloads and verifies the code bases they pin, reads
them through this module. A trainer runs from a checkout of the repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root (this file is ``training/coderag_training/pins.py``)."""

BENCH = ROOT / "bench"
"""Where the pinned lists and the questions live."""

CORPORA_FILE = BENCH / "corpora.json"
"""The benchmark's code bases, each in a split (tune, tune2: tunable; test, test2: frozen)."""

MINING_FILE = BENCH / "mining.json"
"""Code bases training questions are mined from (``split: "mined"``, in neither split)."""

WRITTEN_DIR = BENCH / "written"
"""One JSON list per file: the code bases of the written-questions program (issue 44), split
``wtrain`` (training) or ``wtest`` (frozen test, by code base)."""

QUESTIONS = BENCH / "questions"
"""The questions: ``<corpus>.jsonl`` per benchmark code base, and the written, unsafe and
evidence sets in folders of their own."""

CACHE = BENCH / ".cache"
"""The work area: fetched code bases, indexes, candidate lists, saved hits, training runs."""

REQUIRED_KEYS = ("name", "kind", "package", "version", "sha256", "root", "language")
"""What every entry of a pinned list names."""

KINDS = ("pypi", "debian", "npm")
"""Where a pinned code base is downloaded from."""


class PinError(RuntimeError):
    """A pinned list is malformed or lacks a code base, or a code base cannot be fetched
    (``bench/fetch.py`` knows it as ``FetchError``)."""


def load_corpora(path: Path = CORPORA_FILE) -> list[dict[str, Any]]:
    """The code-base entries of ``bench/corpora.json`` (or of ``path``), validated for the
    required keys."""
    entries = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(entries, list):
        raise PinError(f"{path}: expected a JSON list")
    for entry in entries:
        missing = [key for key in REQUIRED_KEYS if key not in entry]
        if missing:
            raise PinError(f"{path}: entry {entry!r} lacks {missing}")
        if entry["kind"] not in KINDS:
            raise PinError(f"{path}: unknown kind {entry['kind']!r}")
    return entries


def load_mining() -> list[dict[str, Any]]:
    """The entries of ``bench/mining.json`` (code bases mined for training questions)."""
    return load_corpora(MINING_FILE) if MINING_FILE.is_file() else []


def written_files() -> list[Path]:
    """The written program's pinned lists, in name order."""
    return sorted(WRITTEN_DIR.glob("*.json"))


def load_written() -> list[dict[str, Any]]:
    """The code bases of ``bench/written/*.json`` that are not already in ``mining.json`` (the
    written program also writes questions over mined code bases)."""
    mined = {entry["name"] for entry in load_mining()}
    entries: list[dict[str, Any]] = []
    for path in written_files():
        entries += [entry for entry in load_corpora(path) if entry["name"] not in mined]
    return entries


def get_corpus(name: str) -> dict[str, Any]:
    """The code base called ``name`` (``corpora.json`` first, then ``mining.json``, then
    ``written/*.json``); a PinError when no list names it."""
    entries = load_corpora() + load_mining() + load_written()
    for entry in entries:
        if entry["name"] == name:
            return entry
    known = ", ".join(entry["name"] for entry in entries)
    raise PinError(f"unknown corpus {name!r} (known: {known})")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, blank lines skipped."""
    lines = path.read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def relative(path: Path) -> str:
    """``path`` as a card records it: relative to the repository's root when inside it."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(resolved)
