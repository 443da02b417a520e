"""Symbols by qualified name: ``/calls`` finds a unit by it, and the call graph finds the keys
bound to a function (``binding`` rows, whose ``qualified`` is the function's name) by it on
every search's caller walk; without an index each was a scan of the repository's symbols.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0005"
"""This revision."""

down_revision = "0004"
"""The revision this one follows."""

branch_labels = None
depends_on = None


def upgrade() -> None:
    """Index ``symbols`` by repository and qualified name."""
    op.create_index("symbols_qualified", "symbols", ["repo", "qualified"])


def downgrade() -> None:
    """Drop the index."""
    op.drop_index("symbols_qualified", table_name="symbols")
