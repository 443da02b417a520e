"""The rows a parse writes beside a file's units (``Catalog.replace_files``, ``set_blame``): the
file itself, its definitions, call sites and imports, and each unit's last commit.

Named tuples rather than dataclasses: the store binds a row's fields in order to its table's
columns, so a typed row is the very tuple the store always took, and the rows stay the same.
"""

from __future__ import annotations

from typing import NamedTuple


class FileRow(NamedTuple):
    """An indexed file: its path, language, line count and content hash (sha1 of its text)."""

    path: str
    language: str
    lines: int
    sha: str


BINDING_KIND = "binding"
"""The kind of a symbol row naming a computed key (``[asJsonSym]``) that a file binds to a
function another file defines: its ``qualified`` is the function's name; it is in no unit (the
call graph resolves it when read)."""


class SymbolRow(NamedTuple):
    """A definition in a file, with the id of the unit holding it (None outside every unit)."""

    file: str
    name: str
    qualified: str
    kind: str
    start_line: int
    end_line: int
    unit_id: str | None


class CallRow(NamedTuple):
    """A call site: the id of the calling unit, the callee, its receiver and the receiver's
    inferred type ('' when unknown), and the line."""

    file: str
    caller_id: str
    callee: str
    receiver: str
    receiver_type: str
    line: int


class ImportRow(NamedTuple):
    """A module a file imports, as the file names it."""

    file: str
    module: str


class UnitCommit(NamedTuple):
    """The newest commit among a unit's committed lines: full hash, author, ISO author date."""

    unit_id: str
    commit: str
    author: str
    date: str
