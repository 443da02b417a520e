"""Process-wide stores, built once from the settings: the catalog (SQLite or PostgreSQL) and the
vector store."""

from __future__ import annotations

import os
import threading

from coderag.errors import NotFound
from coderag.settings import Settings, get_settings
from coderag.store.catalog import Catalog
from coderag.store.database import Database
from coderag.store.vectors import VectorStore, chroma_folder, make_client

__all__ = ["Catalog", "Database", "VectorStore", "get_catalog", "get_vectors", "reset_stores"]

_lock = threading.Lock()
_stores: dict[str, object] = {}


def _key(settings: Settings, what: str) -> str:
    return f"{what}:{settings.data_dir}:{settings.database}:{settings.chroma_url}"


def get_catalog(settings: Settings | None = None) -> Catalog:
    """The catalog over the settings' database (``database_url``, else ``data_dir/coderag.db``)."""
    settings = settings or get_settings()
    key = _key(settings, "catalog")
    with _lock:
        if key not in _stores:
            _stores[key] = Catalog.open(settings.database)
        return _stores[key]  # type: ignore[return-value]


def get_vectors(settings: Settings | None = None) -> VectorStore:
    """The vector store: embedded Chroma in data_dir, or the Chroma server at chroma_url."""
    settings = settings or get_settings()
    key = _key(settings, "vectors")
    with _lock:
        if key not in _stores:
            _stores[key] = VectorStore(
                make_client(settings.chroma_url, settings.data_dir),
                lambda repo: _current_registration(settings, repo),
                None if settings.chroma_url else chroma_folder(settings.data_dir),
                settings.vector_search_ef,
            )
        return _stores[key]  # type: ignore[return-value]


def _current_registration(settings: Settings, repo: str) -> str:
    """The repository's registration id, '' once it is gone (its collections are then dropped)."""
    try:
        return get_catalog(settings).registration(repo)
    except NotFound:
        return ""


def _forget_in_child() -> None:
    """A forked child (an rq work horse) builds its own stores rather than share the parent's
    (the database's own fork hook keeps it off the parent's connections)."""
    global _lock
    _lock = threading.Lock()
    _stores.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def reset_stores() -> None:
    """Close and forget every store (tests switch data_dir between cases)."""
    with _lock:
        for store in _stores.values():
            if isinstance(store, Catalog):
                store.close()
        _stores.clear()
