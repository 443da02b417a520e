"""What a parser process computes for one file: its rows, or why it was skipped. Each process
of the parse pool imports this module when it starts, so it imports only what parsing needs (the
service's modules pull in FastAPI, SQLAlchemy and Alembic: half a second more per process)."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from coderag.index_rows import BINDING_KIND, CallRow, FileRow, ImportRow, SymbolRow
from coderag.redact import redact
from coderag.schemas import Unit
from coderag_parser.files import read_source
from coderag_parser.units import parse_source

log = logging.getLogger(__name__)


class FileJob(NamedTuple):
    """One file to parse: the repository key its units belong to, the directory indexed, the
    file's path in it, its language, the most bytes read, and the deprecation-marker regex."""

    repo: str
    root: str
    path: str
    language: str
    max_bytes: int
    markers: str


@dataclass(frozen=True)
class FileRows:
    """A parsed file: its row, and its units, symbols, call sites and imports."""

    file: FileRow
    units: tuple[Unit, ...]
    symbols: tuple[SymbolRow, ...]
    calls: tuple[CallRow, ...]
    imports: tuple[ImportRow, ...]

    @property
    def path(self) -> str:
        """The file's path in the directory indexed."""
        return self.file.path


@dataclass(frozen=True)
class SkippedFile:
    """A file left out of the index, and why (``read_source``'s reasons, ``too_deep``,
    ``parse_error``, ``parser_crash``)."""

    path: str
    reason: str


def parse_file(job: FileJob) -> FileRows | SkippedFile:
    """Parse one file into its rows, or say why it is skipped."""
    path = job.path
    text, reason = read_source(Path(job.root) / path, job.max_bytes)
    if text is None:
        return SkippedFile(path, reason)
    text, _ = redact(text, path)  # what is parsed is what gets stored, embedded and shown
    try:
        parsed = parse_source(job.repo, path, job.language, text, job.markers)
    except RecursionError:
        log.warning("%s: %s nests too deeply to parse; skipped", job.repo, path)
        return SkippedFile(path, "too_deep")
    except Exception:
        log.warning("%s: parsing %s failed; skipped", job.repo, path, exc_info=True)
        return SkippedFile(path, "parse_error")
    starts = [(u.start_line, u.end_line, u.id) for u in parsed.units]

    def unit_at(line: int) -> str | None:
        return next((uid for s, e, uid in starts if s <= line <= e), None)

    return FileRows(
        file=FileRow(
            path,
            job.language,
            text.count("\n") + 1,
            hashlib.sha1(text.encode("utf-8")).hexdigest(),
        ),
        units=tuple(parsed.units),
        symbols=tuple(
            SymbolRow(
                path,
                s["name"],
                s["qualified"],
                s["kind"],
                s["start_line"],
                s["end_line"],
                None if s["kind"] == BINDING_KIND else unit_at(s["start_line"]),
            )
            for s in parsed.symbols
        ),
        calls=tuple(
            CallRow(path, c["caller"], c["callee"], c["receiver"], c["receiver_type"], c["line"])
            for c in parsed.calls
        ),
        imports=tuple(ImportRow(path, m) for m in dict.fromkeys(parsed.imports)),
    )
