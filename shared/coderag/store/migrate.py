"""Schema migrations: Alembic's revisions in ``migrations/versions``, run to the head revision by
the process that opens the database first (``Database`` runs ``upgrade`` inside a write, so the
write lock keeps concurrent startups from racing)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

MIGRATIONS = Path(__file__).with_name("migrations")
"""Alembic's script directory, shipped inside the package."""


def config(connection: Connection | None = None) -> Config:
    """Alembic's configuration, its migrations to run on ``connection``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    cfg.attributes["connection"] = connection
    return cfg


@lru_cache(maxsize=1)
def heads() -> frozenset[str]:
    """The head revisions of the shipped migrations."""
    return frozenset(ScriptDirectory.from_config(config()).get_heads())


def current(connection: Connection) -> frozenset[str]:
    """The revisions the database is at (none for a new one, or one made before migrations)."""
    return frozenset(MigrationContext.configure(connection).get_current_heads())


def upgrade(connection: Connection) -> None:
    """Bring the database to the head revision, in the transaction ``connection`` is in; a
    database made before migrations existed is completed to the first revision and stamped."""
    if current(connection) != heads():
        command.upgrade(config(connection), "head")
