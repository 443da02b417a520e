"""The first schema: repositories, their files, units, symbols, calls and imports, clusters, the
embedding cache, the audit log, chat sessions and webhook deliveries.

It also adopts a SQLite file made before migrations existed (tables present, no version table,
perhaps without the columns added since): missing tables, columns and indexes are added, nothing
is dropped or rewritten, and Alembic then stamps the file with this revision.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
"""This revision."""

down_revision = None
"""The revision this one follows (none: the first)."""

branch_labels = None
depends_on = None


def _text() -> sa.types.TypeEngine:
    """Text that sorts and compares by code point on both databases (PostgreSQL's default
    collation follows the locale, SQLite's is binary)."""
    return sa.Text().with_variant(sa.Text(collation="C"), "postgresql")


def _col(name: str, kind: object = None, *args: object, **kw: object) -> sa.Column:
    """A column, NOT NULL unless ``nullable=True`` is given; text when no type is."""
    kw.setdefault("nullable", False)
    return sa.Column(name, kind if kind is not None else _text(), *args, **kw)  # type: ignore[arg-type]


def _opt(name: str, kind: object = None) -> sa.Column:
    """A nullable column (text when no type is given)."""
    return _col(name, kind, nullable=True)


def _count(name: str, default: str = "0") -> sa.Column:
    """A NOT NULL integer with a default."""
    return _col(name, sa.Integer, server_default=default)


_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")
"""An identity key: 64-bit on PostgreSQL; SQLite's rowid alias must be spelt INTEGER."""

_meta = sa.MetaData()
sa.Table(
    "repos",
    _meta,
    _col("name", primary_key=True),
    _opt("path"),
    _opt("url"),
    _opt("branch"),
    _col("status"),
    _opt("commit_sha"),
    _count("files"),
    _count("units"),
    _count("skipped"),
    _opt("indexed_at"),
    _opt("error"),
    _opt("progress"),
    _count("generation"),
    _col("dirty", server_default="[]"),
    _opt("silhouette", sa.Double),
    _opt("uid"),
    _col("skipped_reasons", server_default="{}"),
    _opt("lease_owner"),
    _opt("lease_until", sa.Double),
    _count("pending"),
    _count("attempts"),
    _opt("complete", sa.Integer),
    _col("stages", server_default="{}"),
    _opt("searchable_at"),
    _opt("created_at"),
    _opt("vectors_mark"),
)
sa.Table(
    "files",
    _meta,
    _col("repo", primary_key=True),
    _col("path", primary_key=True),
    _col("language"),
    _col("lines", sa.Integer),
    _col("sha"),
    _count("blamed", "1"),
)
sa.Table(
    "units",
    _meta,
    _col("id", primary_key=True),
    *(_col(c) for c in ("repo", "file")),
    _col("start_line", sa.Integer),
    _col("end_line", sa.Integer),
    *(_col(c) for c in ("symbol", "kind", "language", "signature", "doc", "text")),
    _col("is_test", sa.Integer),
    _col("content_hash"),
    _col("facts", server_default="{}"),
    *(_opt(c) for c in ("last_commit", "last_author", "last_date")),
    sa.Index("units_repo_file", "repo", "file"),
)
sa.Table(
    "symbols",
    _meta,
    *(_col(c) for c in ("repo", "file", "name", "qualified", "kind")),
    _col("start_line", sa.Integer),
    _col("end_line", sa.Integer),
    _opt("unit_id"),
    sa.Index("symbols_name", "repo", "name"),
    sa.Index("symbols_file", "repo", "file"),
)
sa.Table(
    "calls",
    _meta,
    *(_col(c) for c in ("repo", "file", "caller_id", "callee", "receiver", "receiver_type")),
    _col("line", sa.Integer),
    sa.Index("calls_callee", "repo", "callee"),
    sa.Index("calls_caller", "caller_id"),
    sa.Index("calls_file", "repo", "file"),
)


def _keyed(name: str, keys: tuple[str, str], value: sa.Column) -> sa.Table:
    """A table of one value under a two-column text key."""
    return sa.Table(name, _meta, *(_col(k, primary_key=True) for k in keys), value)


_keyed("file_history", ("repo", "file"), _col("commits", sa.Integer))
_keyed("clusters", ("repo", "unit_id"), _col("label", sa.Integer))
sa.Table(
    "imports",
    _meta,
    *(_col(c) for c in ("repo", "file", "module")),
    sa.Index("imports_file", "repo", "file"),
)
_keyed("skipped_files", ("repo", "file"), _col("reason"))
_keyed("embed_cache", ("model", "content_hash"), _col("vector", sa.LargeBinary))
sa.Table(
    "audit",
    _meta,
    _col("id", _ID, sa.Identity(), primary_key=True),
    _col("ts"),
    *(_col(c) for c in ("user", "endpoint", "repo", "query", "retrieved_files")),
    _count("llm_input_tokens"),
    _col("response_ms", sa.Double),
    _col("status"),
    sa.Index("audit_ts", "ts"),
    sqlite_autoincrement=True,
)
sa.Table(
    "session_turns",
    _meta,
    _col("id", _ID, sa.Identity(), primary_key=True),
    *(_col(c) for c in ("session_id", "repo", "role", "content")),
    _col("meta", server_default="{}"),
    _col("ts"),
    sa.CheckConstraint("role IN ('user', 'assistant')", name="session_turns_role"),
    sa.Index("session_turns_by_session", "session_id", "repo", "id"),
    sqlite_autoincrement=True,
)
sa.Table("session_owners", _meta, _col("session_id", primary_key=True), _col("user"))
_keyed("webhook_deliveries", ("provider", "delivery"), _col("received_at"))


def upgrade() -> None:
    """Create what is missing: every table in a new database, the columns and indexes added
    since in one made before migrations."""
    bind = op.get_bind()
    have = set(sa.inspect(bind).get_table_names())
    for table in _meta.sorted_tables:
        if table.name not in have:
            table.create(bind)
            continue
        inspector = sa.inspect(bind)
        columns = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in columns:
                op.add_column(table.name, column._copy())
        indexes = {i["name"] for i in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in indexes:
                index.create(bind)


def downgrade() -> None:
    """Drop every table."""
    _meta.drop_all(op.get_bind())
