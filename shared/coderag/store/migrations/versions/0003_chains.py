"""Chains: an indexing chain's lease, restarts, stage progress and vectors mark leave the
repository row for a table of their own (``coderag.store.chain_rows`` writes it; ``repos`` keeps
the registration and the published index).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
"""This revision."""

down_revision = "0002"
"""The revision this one follows."""

branch_labels = None
depends_on = None

MOVED = "lease_owner, lease_until, pending, attempts, stages, vectors_mark"
"""The columns that move, in the order both tables list them."""


def _moved_columns() -> list[sa.Column]:
    """The moved columns as ``0001`` declared them on ``repos``."""
    text = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
    return [
        sa.Column("lease_owner", text, nullable=True),
        sa.Column("lease_until", sa.Double, nullable=True),
        sa.Column("pending", sa.Integer, nullable=False, server_default="0"),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("stages", text, nullable=False, server_default="{}"),
        sa.Column("vectors_mark", text, nullable=True),
    ]


def upgrade() -> None:
    """Create ``chains`` (one row per repository a chain has run for), copy every repository's
    chain columns into it, then drop them from ``repos``."""
    text = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
    op.create_table(
        "chains", sa.Column("repo", text, primary_key=True, nullable=False), *_moved_columns()
    )
    op.execute(sa.text(f"INSERT INTO chains (repo, {MOVED}) SELECT name, {MOVED} FROM repos"))
    with op.batch_alter_table("repos") as batch:
        for column in _moved_columns():
            batch.drop_column(column.name)


def downgrade() -> None:
    """Put the chain columns back on ``repos`` with their values, then drop ``chains``."""
    with op.batch_alter_table("repos") as batch:
        for column in _moved_columns():
            batch.add_column(column)
    for column in _moved_columns():
        op.execute(
            sa.text(
                f"UPDATE repos SET {column.name} = (SELECT c.{column.name} FROM chains c "
                f"WHERE c.repo = repos.name) WHERE name IN (SELECT repo FROM chains)"
            )
        )
    op.drop_table("chains")
