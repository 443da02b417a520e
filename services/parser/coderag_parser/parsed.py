"""What the parser learns from one file: its units, symbol rows, call sites and imports
(``units`` cuts the units, ``facts`` adds the rest)."""

from __future__ import annotations

from dataclasses import dataclass, field

from coderag.schemas import Unit


@dataclass
class ParsedFile:
    """Everything the parser learns from one file."""

    units: list[Unit]
    symbols: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
