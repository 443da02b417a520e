"""The schema as the store wrote it before migrations existed (``shared/coderag/store/sqlite.py``
and ``sessions.py`` at commit cf65e93), kept verbatim as a fixture: the first migration must adopt
a file made by it."""

OLD_SCHEMA = """CREATE TABLE IF NOT EXISTS repos (
    name TEXT PRIMARY KEY,
    path TEXT, url TEXT, branch TEXT,
    status TEXT NOT NULL,
    commit_sha TEXT,
    files INTEGER NOT NULL DEFAULT 0,
    units INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,
    indexed_at TEXT,
    error TEXT,
    progress TEXT,
    generation INTEGER NOT NULL DEFAULT 0,
    dirty TEXT NOT NULL DEFAULT '[]',
    silhouette REAL,
    uid TEXT,
    skipped_reasons TEXT NOT NULL DEFAULT '{}',
    lease_owner TEXT,
    lease_until REAL,
    pending INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    complete INTEGER,
    stages TEXT NOT NULL DEFAULT '{}',
    searchable_at TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))
);
CREATE TABLE IF NOT EXISTS files (
    repo TEXT NOT NULL,
    path TEXT NOT NULL,
    language TEXT NOT NULL,
    lines INTEGER NOT NULL,
    sha TEXT NOT NULL,
    blamed INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (repo, path)
);
CREATE TABLE IF NOT EXISTS units (
    id TEXT PRIMARY KEY,
    repo TEXT NOT NULL,
    file TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    symbol TEXT NOT NULL,
    kind TEXT NOT NULL,
    language TEXT NOT NULL,
    signature TEXT NOT NULL,
    doc TEXT NOT NULL,
    text TEXT NOT NULL,
    is_test INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    facts TEXT NOT NULL DEFAULT '{}',
    last_commit TEXT, last_author TEXT, last_date TEXT
);
CREATE INDEX IF NOT EXISTS units_repo_file ON units (repo, file);
CREATE TABLE IF NOT EXISTS symbols (
    repo TEXT NOT NULL, file TEXT NOT NULL, name TEXT NOT NULL, qualified TEXT NOT NULL,
    kind TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, unit_id TEXT
);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols (repo, name);
CREATE INDEX IF NOT EXISTS symbols_file ON symbols (repo, file);
CREATE TABLE IF NOT EXISTS calls (
    repo TEXT NOT NULL, file TEXT NOT NULL, caller_id TEXT NOT NULL, callee TEXT NOT NULL,
    receiver TEXT NOT NULL, receiver_type TEXT NOT NULL, line INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_callee ON calls (repo, callee);
CREATE INDEX IF NOT EXISTS calls_caller ON calls (caller_id);
CREATE INDEX IF NOT EXISTS calls_file ON calls (repo, file);
CREATE TABLE IF NOT EXISTS file_history (
    repo TEXT NOT NULL, file TEXT NOT NULL, commits INTEGER NOT NULL,
    PRIMARY KEY (repo, file)
);
CREATE TABLE IF NOT EXISTS clusters (
    repo TEXT NOT NULL, unit_id TEXT NOT NULL, label INTEGER NOT NULL,
    PRIMARY KEY (repo, unit_id)
);
CREATE TABLE IF NOT EXISTS imports (
    repo TEXT NOT NULL, file TEXT NOT NULL, module TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS imports_file ON imports (repo, file);
CREATE TABLE IF NOT EXISTS skipped_files (
    repo TEXT NOT NULL, file TEXT NOT NULL, reason TEXT NOT NULL,
    PRIMARY KEY (repo, file)
);
CREATE TABLE IF NOT EXISTS embed_cache (
    model TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, content_hash)
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    user TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    repo TEXT NOT NULL,
    query TEXT NOT NULL,
    retrieved_files TEXT NOT NULL,
    llm_input_tokens INTEGER NOT NULL DEFAULT 0,
    response_ms REAL NOT NULL,
    status TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_ts ON audit (ts);
"""
"""The catalog's CREATE script: every table but the sessions' (created on first use)."""

OLD_SESSIONS = """
CREATE TABLE IF NOT EXISTS session_turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    repo TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    ts TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
CREATE INDEX IF NOT EXISTS session_turns_by_session ON session_turns (session_id, repo, id);
CREATE TABLE IF NOT EXISTS session_owners (
    session_id TEXT PRIMARY KEY,
    user TEXT NOT NULL
);
"""
"""The sessions' tables, created by the old code on a session's first use."""

OLD_ADDED_COLUMNS = (
    ("repos", "uid"),
    ("repos", "skipped_reasons"),
    ("repos", "lease_owner"),
    ("repos", "lease_until"),
    ("repos", "pending"),
    ("repos", "attempts"),
    ("repos", "complete"),
    ("repos", "stages"),
    ("repos", "searchable_at"),
    ("files", "blamed"),
    ("repos", "vectors_mark"),
)
"""Columns the old code added to older files (``ADDED_COLUMNS``); ``vectors_mark`` was never in
the CREATE script."""
