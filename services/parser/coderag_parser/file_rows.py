"""What a parser process computes for one file: its rows, or why it was skipped. Each process
of the parse pool imports this module when it starts, so it imports only what parsing needs (the
service's modules pull in FastAPI, SQLAlchemy and Alembic: half a second more per process)."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any

from coderag.redact import redact
from coderag_parser.files import read_source
from coderag_parser.units import parse_source

log = logging.getLogger(__name__)


def parse_file(args: tuple[str, str, str, str, int, str]) -> dict[str, Any]:
    """Parse one file: (repo, root, path, language, max_bytes, deprecation markers) -> its rows,
    or a skip."""
    repo, root, path, language, max_bytes, markers = args
    text, reason = read_source(Path(root) / path, max_bytes)
    if text is None:
        return {"path": path, "skip": reason}
    text, _ = redact(text, path)  # what is parsed is what gets stored, embedded and shown
    try:
        parsed = parse_source(repo, path, language, text, markers)
    except RecursionError:
        log.warning("%s: %s nests too deeply to parse; skipped", repo, path)
        return {"path": path, "skip": "too_deep"}
    except Exception:
        log.warning("%s: parsing %s failed; skipped", repo, path, exc_info=True)
        return {"path": path, "skip": "parse_error"}
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
