"""Refs: a repository row may be another branch or tag of a repository (``ref_of`` names it),
indexed under a key of its own (``coderag.store.refs``).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
"""This revision."""

down_revision = "0001"
"""The revision this one follows."""

branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``repos.ref_of`` and an index to list a repository's refs."""
    text = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
    with op.batch_alter_table("repos") as batch:
        batch.add_column(sa.Column("ref_of", text, nullable=True))
    op.create_index("repos_ref_of", "repos", ["ref_of"])


REF_TABLES = (
    "units", "files", "symbols", "calls", "imports", "file_history", "skipped_files", "clusters",
    "session_turns",
)  # fmt: skip
"""Tables whose rows a ref owns by ``repo`` (dropped with the refs on a downgrade)."""


def downgrade() -> None:
    """Drop the refs with every row they own, then the column (a migration cannot reach
    Chroma: the refs' collections stay until deleted there)."""
    refs = "SELECT name FROM repos WHERE ref_of IS NOT NULL"
    for table in REF_TABLES:
        op.execute(sa.text(f"DELETE FROM {table} WHERE repo IN ({refs})"))
    op.execute(sa.text("DELETE FROM repos WHERE ref_of IS NOT NULL"))
    op.drop_index("repos_ref_of", table_name="repos")
    with op.batch_alter_table("repos") as batch:
        batch.drop_column("ref_of")
