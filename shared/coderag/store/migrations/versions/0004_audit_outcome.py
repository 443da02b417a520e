"""Audit outcome: each audit row says why a question was refused (``refusal``, empty when it was
answered) and which ``FILE:start-end`` ranges the answer cited (``cited``, a JSON list as
``retrieved_files`` is), appended after the existing columns (issue 43).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
"""This revision."""

down_revision = "0003"
"""The revision this one follows."""

branch_labels = None
depends_on = None


def _columns() -> list[sa.Column]:
    """The added columns, NOT NULL with a default so the rows already written stay valid."""
    text = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
    return [
        sa.Column("refusal", text, nullable=False, server_default=""),
        sa.Column("cited", text, nullable=False, server_default="[]"),
    ]


def upgrade() -> None:
    """Add ``audit.refusal`` and ``audit.cited``."""
    with op.batch_alter_table("audit") as batch:
        for column in _columns():
            batch.add_column(column)


def downgrade() -> None:
    """Drop them again (what they held is lost)."""
    with op.batch_alter_table("audit") as batch:
        for column in _columns():
            batch.drop_column(column.name)
