"""Which tables hold the rows of one file, or of one repository, so a removal or a ref's fork
reaches every one of them."""

from __future__ import annotations

FILE_TABLES = ("units", "files", "symbols", "calls", "imports", "file_history", "skipped_files")
"""Tables whose rows belong to one file of one repository."""

FILE_COLUMN = {"files": "path"}
"""The column naming the file, where it is not ``file``."""

REPO_TABLES = (*FILE_TABLES, "clusters", "session_turns", "chains")
"""Tables whose rows belong to one repository (its ``repo`` column)."""
