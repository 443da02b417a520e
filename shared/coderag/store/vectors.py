"""Chroma: one cosine collection per repository and vector space (one per encoder), embedded by
default or a server in compose.

Embeddings are always passed in, never computed by Chroma (its default function reaches the
network), and a collection is dropped whole with its repository so no vector is orphaned. Chroma
1.x drops a deleted collection's rows but leaves its HNSW segment folder on disk (an open Chroma
issue, #5259: the removal is left to a garbage collector the local server does not run), so
``sweep_segments`` removes the folders no collection owns: after every drop where this process
has Chroma's folder (embedded Chroma), and every few seconds in ``coderag chroma``, which runs
the Chroma server whose folder it owns.

A collection belongs to one registration of a repository (its name carries the registration id,
its metadata the repository's name): a job still writing for a deleted repository writes into its
own collection, never into a new repository of the same name.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlparse

from coderag import spaces
from coderag.errors import Unavailable
from coderag.settings import Settings

SPACE_PREFIXES = spaces.PREFIXES
"""Collection-name prefix per vector space (``coderag.spaces``)."""

COLLECTION_PREFIX = SPACE_PREFIXES[spaces.NAMES[0]]
"""Collection name of repository ``r`` in the main space (``vector``) is ``repo_r``."""

SEARCH_EF: int = Settings.model_fields["vector_search_ef"].default
"""HNSW candidates examined per query unless ``CODERAG_VECTOR_SEARCH_EF`` says otherwise (why
512: that setting's description)."""


def make_client(chroma_url: str | None, data_dir: Path) -> Any:
    """A Chroma client: HttpClient when a server URL is set, else PersistentClient in data_dir."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if chroma_url:
        parsed = urlparse(chroma_url)
        return chromadb.HttpClient(
            host=parsed.hostname or "localhost",
            port=parsed.port or 8000,
            ssl=parsed.scheme == "https",
            settings=chroma_settings,
        )
    return chromadb.PersistentClient(path=str(chroma_folder(data_dir)), settings=chroma_settings)


def chroma_folder(data_dir: Path) -> Path:
    """Embedded Chroma's data folder inside coderag's data directory."""
    return data_dir / "chroma"


CHROMA_DB = "chroma.sqlite3"
"""Chroma's own database in its data folder (its ``segments`` table names every live segment)."""


def _is_uuid(name: str) -> bool:
    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False


def sweep_segments(folder: Path) -> list[str]:
    """Remove the segment folders in Chroma's data ``folder`` that no collection owns (a
    deleted collection's vectors); the names removed. Only folders named by a UUID, directly in
    ``folder``, and absent from Chroma's ``segments`` table go. The folders are listed before
    the table is read: Chroma commits a segment's row when it creates the collection, before it
    writes the segment's folder, so a folder that exists at the listing has its row in the later
    read, and a collection created meanwhile keeps its folder."""
    db = folder / CHROMA_DB
    if not db.is_file():
        return []
    listed = [p for p in folder.iterdir() if _is_uuid(p.name) and p.is_dir() and not p.is_symlink()]
    if not listed:
        return []
    # read-only: this process never writes Chroma's database
    uri = f"file:{quote(str(db.resolve()))}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
        owned = {row[0] for row in conn.execute("SELECT id FROM segments")}
    removed = []
    for path in listed:
        if path.name not in owned:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    return removed


def _missing(exc: Exception) -> bool:
    """Whether Chroma answered that a collection does not exist (not that it is unreachable)."""
    from chromadb.errors import NotFoundError

    return isinstance(exc, NotFoundError) or "does not exist" in str(exc)


class Rows(Protocol):
    """Vectors, one a row, as ``upsert`` takes them: a list of lists or a 2-D numpy array."""

    def __getitem__(self, rows: slice, /) -> Iterable[Iterable[float]]: ...


def _nearest(col: Any, vector: Iterable[float], n: int) -> list[tuple[str, float]]:
    """The collection's ``n`` nearest vectors as (id, cosine similarity), best first."""
    res = col.query(query_embeddings=[list(map(float, vector))], n_results=n, include=["distances"])
    return [(i, 1.0 - d) for i, d in zip(res["ids"][0], res["distances"][0], strict=True)]


Registration = Callable[[str], str]
"""The current registration id of a repository name ('' when unknown or registered before ids)."""


PAGE = 5000
"""Vectors read per ``get`` of a whole collection: Chroma answers one unpaged ``get`` of more
than about 32k vectors with SQLite's "too many SQL variables"."""


def _pages(col: Any, include: list[str]) -> Iterator[dict[str, Any]]:
    """A whole collection's ``get`` results, ``PAGE`` vectors at a time."""
    offset = 0
    while True:
        try:
            got = col.get(include=include, limit=PAGE, offset=offset)
        except Exception as exc:
            raise Unavailable(f"Chroma is not reachable: {exc}") from exc
        yield got
        if len(got["ids"]) < PAGE:
            return
        offset += PAGE


def collection_name(repo: str, space: str, registration: str) -> str:
    """Chroma collection of one registration of a repository in one vector space."""
    # Chroma allows no '@' in a name; the registration id that ends it keeps names distinct
    base = SPACE_PREFIXES[space] + repo.replace("@", "_ref_")
    return f"{base}.{registration[:16]}" if registration else base


class VectorStore:
    """Upsert, query and delete unit vectors of each repository."""

    def __init__(
        self,
        client: Any,
        registration: Registration | None = None,
        folder: Path | None = None,
        search_ef: int = SEARCH_EF,
    ) -> None:
        self.client = client
        self.search_ef = search_ef
        """HNSW candidates examined per query (``CODERAG_VECTOR_SEARCH_EF``)."""
        self._registration = registration
        self.folder = folder
        """Chroma's data folder when this process owns it (embedded): swept after a drop."""
        self._lock = threading.Lock()
        self._searched_wide: set[str] = set()
        self._opened: dict[str, Any] = {}

    def _name(self, repo: str, space: str, registration: str | None) -> str:
        if registration is None:
            registration = self._registration(repo) if self._registration else ""
        return collection_name(repo, space, registration)

    def _collection(
        self,
        repo: str,
        create: bool = True,
        space: str = spaces.MAIN,
        registration: str | None = None,
    ) -> Any:
        name = self._name(repo, space, registration)
        try:
            if create:
                col = self.client.get_or_create_collection(
                    name,
                    metadata={"hnsw:space": "cosine", "repo": repo},
                    embedding_function=None,
                )
            else:
                col = self.client.get_collection(name, embedding_function=None)
            return self._search_wide(col)
        except Exception as exc:
            if not create and _missing(exc):
                return None
            raise Unavailable(f"Chroma is not reachable: {exc}") from exc

    def _search_wide(self, col: Any) -> Any:
        """The collection, its queries examining ``search_ef`` candidates (set once per
        collection and process: collections made with Chroma's default are changed on first
        use)."""
        if col.name not in self._searched_wide:
            hnsw = (col.configuration_json or {}).get("hnsw") or {}
            if hnsw.get("ef_search") != self.search_ef:
                col.modify(configuration={"hnsw": {"ef_search": self.search_ef}})
            self._searched_wide.add(col.name)
        return col

    def upsert(
        self,
        repo: str,
        ids: Sequence[str],
        vectors: Rows,
        metadatas: Sequence[dict[str, Any]],
        space: str = spaces.MAIN,
        registration: str | None = None,
    ) -> None:
        """Write vectors with their metadata, replacing any with the same id (into the given
        registration's collection, else the current one's)."""
        if not ids:
            return
        col = self._collection(repo, space=space, registration=registration)
        step = 2000
        for i in range(0, len(ids), step):
            col.upsert(
                ids=list(ids[i : i + step]),
                embeddings=[list(map(float, v)) for v in vectors[i : i + step]],
                metadatas=list(metadatas[i : i + step]),
            )

    def delete(
        self,
        repo: str,
        ids: Sequence[str],
        space: str = spaces.MAIN,
        registration: str | None = None,
    ) -> None:
        """Delete vectors by unit id."""
        col = self._collection(repo, create=False, space=space, registration=registration)
        if col is not None and ids:
            col.delete(ids=list(ids))

    def query(
        self,
        repo: str,
        vector: Iterable[float],
        n: int,
        space: str = spaces.MAIN,
        registration: str | None = None,
    ) -> list[tuple[str, float]]:
        """Nearest units as (id, cosine similarity), best first (fewer when the collection holds
        fewer than ``n``), in the given registration's collection, else the current one's."""
        name = self._name(repo, space, registration)
        # an open handle saves a lookup per query (a fifth of a query's Chroma time); its name
        # carries the registration, so a re-registered repository opens a new one
        opened = self._opened.get(name)
        if opened is not None:
            try:
                return _nearest(opened, vector, n)
            except Exception as exc:
                self._opened.pop(name, None)
                if not _missing(exc):
                    raise Unavailable(f"Chroma is not reachable: {exc}") from exc
                # dropped, perhaps made anew, since it was opened: open it again below
        col = self._collection(repo, create=False, space=space, registration=registration)
        if col is None:
            return []
        try:
            found = _nearest(col, vector, n)
        except Exception as exc:
            raise Unavailable(f"Chroma is not reachable: {exc}") from exc
        self._opened[name] = col
        return found

    def ids(self, repo: str, space: str = spaces.MAIN, registration: str | None = None) -> set[str]:
        """Every vector id stored for a repository."""
        col = self._collection(repo, create=False, space=space, registration=registration)
        if col is None:
            return set()
        return {i for got in _pages(col, []) for i in got["ids"]}

    def hashes(
        self, repo: str, space: str = spaces.MAIN, registration: str | None = None
    ) -> dict[str, str]:
        """Vector id -> the content hash of the text it encodes ('' when its metadata lacks
        one), for the repair pass that compares them with the catalog."""
        col = self._collection(repo, create=False, space=space, registration=registration)
        if col is None:
            return {}
        return {
            i: str((m or {}).get("content_hash", ""))
            for got in _pages(col, ["metadatas"])
            for i, m in zip(got["ids"], got["metadatas"], strict=True)
        }

    def embeddings(
        self,
        repo: str,
        ids: Sequence[str],
        space: str = spaces.MAIN,
        registration: str | None = None,
    ) -> dict[str, tuple[Sequence[float], str]]:
        """Stored vectors of the given unit ids, each with the content hash of the text it
        encodes ('' when its metadata lacks one); ids with no vector are left out."""
        col = self._collection(repo, create=False, space=space, registration=registration)
        out: dict[str, tuple[Sequence[float], str]] = {}
        if col is None:
            return out
        step = 2000
        for i in range(0, len(ids), step):
            try:
                got = col.get(ids=list(ids[i : i + step]), include=["embeddings", "metadatas"])
            except Exception as exc:
                raise Unavailable(f"Chroma is not reachable: {exc}") from exc
            for uid, vector, meta in zip(
                got["ids"], got["embeddings"], got["metadatas"], strict=True
            ):
                out[uid] = (vector, str((meta or {}).get("content_hash", "")))
        return out

    def count(self, repo: str, space: str = spaces.MAIN, registration: str | None = None) -> int:
        """Number of vectors stored for a repository (in the given registration's collection,
        else the current one's)."""
        col = self._collection(repo, create=False, space=space, registration=registration)
        return 0 if col is None else col.count()

    def dimension(self, repo: str, space: str = spaces.MAIN) -> int | None:
        """Length of the repository's vectors in one space, or None when it has none."""
        col = self._collection(repo, create=False, space=space)
        if col is None:
            return None
        got = col.get(limit=1, include=["embeddings"])["embeddings"]
        return None if got is None or len(got) == 0 else len(got[0])

    def drop(self, repo: str, space: str | None = None, registration: str | None = None) -> None:
        """Delete a repository's collections in one space or in every space: those of one
        registration when given, else those of every registration of the name (a deleted
        repository's, and any a late job left)."""
        spaces = [space] if space else list(SPACE_PREFIXES)
        if registration is not None:
            names = {collection_name(repo, s, registration) for s in spaces}
        else:
            names = {collection_name(repo, s, "") for s in spaces}
            try:
                listed = self.client.list_collections()
            except Exception as exc:
                raise Unavailable(f"Chroma is not reachable: {exc}") from exc
            for col in listed:
                if (col.metadata or {}).get("repo") == repo and any(
                    col.name.startswith(collection_name(repo, s, "") + ".") for s in spaces
                ):
                    names.add(col.name)
        with self._lock:
            for name in names:
                try:
                    self.client.get_collection(name, embedding_function=None)
                except Exception:
                    continue
                self.client.delete_collection(name)
                self._opened.pop(name, None)
            if self.folder is not None:
                sweep_segments(self.folder)

    def heartbeat(self) -> bool:
        """Whether Chroma answers."""
        try:
            self.client.heartbeat()
            return True
        except Exception:
            return False
