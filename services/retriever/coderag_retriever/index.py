"""A repository's in-memory keyword and symbol indexes, kept per generation and updated file by
file: a new generation re-reads only the files whose content hash moved (shards.py), and the BM25
postings gain and lose only those files' documents (postings.py).

The generation lives on the repository row, so an API process notices a refresh done by another
process (an rq worker in compose) on its next query.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from coderag import spaces
from coderag.schemas import Unit
from coderag.store import Catalog, get_vectors
from coderag_retriever import shards
from coderag_retriever.postings import Postings
from coderag_retriever.shards import FileShard

log = logging.getLogger(__name__)

REBUILD_SHARE = 0.25
"""A new generation that changed more than this share of the files is read whole (one query
for all units beats one per file)."""


@dataclass
class RepoIndex:
    """Units of one repository with BM25 postings over their text and a symbol-token index."""

    generation: int
    units: list[Unit]
    ids: list[str]
    position: dict[str, int]
    postings: Postings
    slot_of: np.ndarray
    symbol_tokens: list[frozenset[str]]
    by_symbol_token: dict[str, list[int]] = field(default_factory=dict)
    symbol_vocabulary: list[str] = field(default_factory=list)  # sorted: prefix lookups
    by_name: dict[str, list[int]] = field(default_factory=dict)
    history: np.ndarray = field(default_factory=lambda: np.zeros(0))
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    files: dict[str, FileShard] = field(default_factory=dict, repr=False)
    read: list[str] = field(default_factory=list)  # files read for this generation (tests, bench)
    _vectors: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    registration: str = ""

    def __len__(self) -> int:
        return len(self.units)

    def history_scores(self, catalog: Catalog, repo: str) -> np.ndarray:
        """Per-unit history scores, computed on first use: they walk the whole call table, so
        a repository whose history route is off never pays for them."""
        if len(self.history) != len(self.units):
            self.history = history_scores(catalog, repo, self.units)
        return self.history

    def vectors(self, space: str = spaces.MAIN) -> np.ndarray:
        """Unit vectors of one space in position order (from the vector store), loaded on
        first use."""
        if space not in self._vectors:
            self._vectors[space] = load_vectors(self.units, space, self.registration or None)
        return self._vectors[space]


def load_vectors(
    units: list[Unit], space: str = spaces.MAIN, registration: str | None = None
) -> np.ndarray:
    """The stored vectors of one repository's units in one space, a row per unit in their
    order; zeros where the store holds no vector of the unit's current content (none yet, or
    one encoding an older text: its content hash differs). No vectors at all: zero columns."""
    if not units:
        return np.zeros((0, 0), dtype=np.float32)
    stored = get_vectors().embeddings(units[0].repo, [u.id for u in units], space, registration)
    dim = next((len(v) for v, _ in stored.values()), 0)
    out = np.zeros((len(units), dim), dtype=np.float32)
    for i, u in enumerate(units):
        got = stored.get(u.id)
        if got is not None and got[1] == u.content_hash:
            out[i] = got[0]
    return out


def history_scores(catalog: Catalog, repo: str, units: list[Unit]) -> np.ndarray:
    """Seed 004's history score per unit: log(1 + recent commits × (1 + references)) of its file."""
    commits = catalog.history(repo)
    if not commits:
        return np.zeros(len(units))
    refs = catalog.graph().file_references(repo)
    per_file = {f: float(np.log1p(n * (1 + refs.get(f, 0)))) for f, n in commits.items()}
    return np.array([per_file.get(u.file, 0.0) for u in units])


def cluster_labels(catalog: Catalog, repo: str, ids: list[str]) -> np.ndarray:
    """HDBSCAN label per unit position (-1: noise or not clustered yet)."""
    by_id = catalog.clusters.labels(repo)
    return np.array([by_id.get(i, -1) for i in ids], dtype=np.int64)


def assemble(
    files: dict[str, FileShard], postings: Postings, generation: int, read: list[str]
) -> RepoIndex:
    """The index of a repository from its files' shards, in path and line order (a full build
    and any sequence of updates give the same positions)."""
    units: list[Unit] = []
    slots: list[int] = []
    symbols: list[frozenset[str]] = []
    names: list[frozenset[str]] = []
    for path in sorted(files):
        shard = files[path]
        units += shard.units
        slots += shard.slots
        symbols += shard.symbols
        names += shard.names
    by_token: dict[str, list[int]] = defaultdict(list)
    by_name: dict[str, list[int]] = defaultdict(list)
    for pos, (toks, defined) in enumerate(zip(symbols, names, strict=True)):
        for t in sorted(toks):
            by_token[t].append(pos)
        for name in sorted(defined):
            by_name[name].append(pos)
    ids = [u.id for u in units]
    return RepoIndex(
        generation=generation,
        units=units,
        ids=ids,
        position={u: i for i, u in enumerate(ids)},
        postings=postings,
        slot_of=np.array(slots, dtype=np.int64),
        symbol_tokens=symbols,
        by_symbol_token=dict(by_token),
        symbol_vocabulary=sorted(by_token),
        by_name=dict(by_name),
        files=files,
        read=read,
    )


def build(catalog: Catalog, repo: str, generation: int) -> RepoIndex:
    """Index all of a repository's units from scratch."""
    postings = Postings()
    files = shards.read_all(catalog, repo, postings)
    return assemble(files, postings, generation, sorted(files))


def update(catalog: Catalog, repo: str, old: RepoIndex, generation: int) -> RepoIndex:
    """The next generation of ``old``: files whose version moved (content, or last commits
    recorded since) are read again, removed ones dropped, the rest reused; from scratch when
    much changed or the postings hold more removed documents than live ones."""
    shas = catalog.file_versions(repo)
    changed = sorted(p for p, sha in shas.items() if p not in old.files or old.files[p].sha != sha)
    removed = sorted(set(old.files) - set(shas))
    postings = old.postings
    if len(changed) + len(removed) > REBUILD_SHARE * max(len(shas), 1) or (
        postings.dead > postings.live
    ):
        return build(catalog, repo, generation)
    files = dict(old.files)
    for path in removed:
        shards.drop_shard(files.pop(path), postings)
    for path in changed:
        known = files.pop(path, None)
        if known is not None:
            shards.drop_shard(known, postings)
        files[path] = shards.read_file(catalog, repo, path, shas[path], postings, known)
    return assemble(files, postings, generation, changed)


def bm25_scores(index: RepoIndex, tokens: list[str], n: int) -> list[tuple[int, float]]:
    """Top ``n`` units by BM25 as (position, score), ties in position order."""
    if not tokens or not len(index) or n <= 0:
        return []
    scores = index.postings.scores(tokens)[index.slot_of]
    k = min(n, len(scores))
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    order = top[np.lexsort((top, -scores[top]))]
    return [(int(p), float(scores[p])) for p in order if scores[p] > 0]


class IndexCache:
    """One RepoIndex per repository, brought up to date when the catalog's generation moves;
    each repository has its own lock, so one repository's update never holds another's
    queries."""

    def __init__(self) -> None:
        self._indexes: dict[str, RepoIndex] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, repo: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(repo, threading.Lock())

    def get(
        self, catalog: Catalog, repo: str, published: tuple[int, str] | None = None
    ) -> RepoIndex:
        """The current index of a repository: of its ``published`` (generation, registration id)
        when the caller read its row already, else as the catalog has it now."""
        # generations restart at 0 when a name is registered again: key by registration too
        generation, registration = published or catalog.published(repo)
        with self._lock(repo):
            cached = self._indexes.get(repo)
            if cached is not None and cached.registration == registration:
                if cached.generation == generation:
                    return cached
                try:
                    index = update(catalog, repo, cached, generation)
                except BaseException:
                    # the shared postings may be half updated: the next query builds afresh
                    self._indexes.pop(repo, None)
                    raise
            else:
                index = build(catalog, repo, generation)
            index.registration = registration
            index.labels = cluster_labels(catalog, repo, index.ids)
            self._indexes[repo] = index
            return index

    def forget(self, repo: str) -> None:
        """Drop a repository's index."""
        with self._lock(repo):
            self._indexes.pop(repo, None)

    def holds(self, repo: str) -> bool:
        """Whether a repository's index is in memory."""
        return repo in self._indexes

    def warm(self, catalog: Catalog) -> threading.Thread:
        """Build every searchable repository's index in the background (the returned thread),
        so the first question or commit after a restart does not wait for it (1.5 s for 100k
        lines)."""

        def build_all() -> None:
            for repo in catalog.list_repos():
                if repo.status != "ready":
                    continue
                try:
                    self.get(catalog, repo.name)
                except Exception as exc:  # the first query builds it again and reports why
                    log.warning("index of %s not built ahead: %s", repo.name, exc)

        thread = threading.Thread(target=build_all, name="index-warm", daemon=True)
        thread.start()
        return thread


_cache = IndexCache()


def get_index_cache() -> IndexCache:
    """The process-wide index cache."""
    return _cache
