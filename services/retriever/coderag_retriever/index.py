"""A repository's in-memory keyword and symbol indexes, rebuilt when its generation changes.

The generation lives on the repository row, so an API process notices a refresh done by another
process (an rq worker in compose) on its next query.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

import bm25s
import numpy as np

from coderag.schemas import Unit
from coderag.store import Catalog, get_vectors
from coderag.store import clusters as cluster_table
from coderag.store import symbols as symbol_table
from coderag_retriever.text import code_tokens, split_identifier, stem


@dataclass
class RepoIndex:
    """Units of one repository with a BM25 index over their text and a symbol-token index."""

    generation: int
    units: list[Unit]
    ids: list[str]
    position: dict[str, int]
    bm25: bm25s.BM25 | None
    symbol_tokens: list[frozenset[str]]
    by_symbol_token: dict[str, list[int]] = field(default_factory=dict)
    by_name: dict[str, list[int]] = field(default_factory=dict)
    history: np.ndarray = field(default_factory=lambda: np.zeros(0))
    labels: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    documents: dict[tuple[str, str], list[str]] = field(default_factory=dict, repr=False)
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

    def vectors(self, space: str = "vector") -> np.ndarray:
        """Unit vectors of one space in position order (from the vector store), loaded on
        first use."""
        if space not in self._vectors:
            self._vectors[space] = load_vectors(self.units, space, self.registration or None)
        return self._vectors[space]


def keyword_document(unit: Unit) -> list[str]:
    """Tokens BM25 indexes for a unit: path, symbol (twice: names matter), doc and code."""
    symbol = code_tokens(unit.symbol)
    return code_tokens(unit.file) + symbol + symbol + code_tokens(unit.doc) + code_tokens(unit.text)


def symbol_token_set(unit: Unit) -> frozenset[str]:
    """Stemmed parts of a unit's qualified name (``Session.resolve_redirects`` -> session,
    resolve, redirect)."""
    words: set[str] = set()
    for piece in unit.symbol.replace("(", " ").replace(")", " ").replace("*", " ").split("."):
        for part in split_identifier(piece.strip()):
            words.add(stem(part))
    return frozenset(w for w in words if len(w) > 1)


def load_vectors(
    units: list[Unit], space: str = "vector", registration: str | None = None
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
    from coderag.store.graph import Graph

    commits = catalog.history(repo)
    if not commits:
        return np.zeros(len(units))
    refs = Graph(catalog.db).file_references(repo)
    per_file = {f: float(np.log1p(n * (1 + refs.get(f, 0)))) for f, n in commits.items()}
    return np.array([per_file.get(u.file, 0.0) for u in units])


def cluster_labels(catalog: Catalog, repo: str, ids: list[str]) -> np.ndarray:
    """HDBSCAN label per unit position (-1: noise or not clustered yet)."""
    by_id = cluster_table.labels(catalog.db, repo)
    return np.array([by_id.get(i, -1) for i in ids], dtype=np.int64)


def name_index(catalog: Catalog, repo: str, index: RepoIndex) -> dict[str, list[int]]:
    """Lower-cased names -> positions of the units defining them: each unit's qualified symbol,
    its last component, and the symbol-table names (constants, variables) inside it."""
    names: dict[str, set[int]] = defaultdict(set)
    for pos, u in enumerate(index.units):
        if u.kind in ("block", "file"):
            continue
        sym = u.symbol.split("[part")[0].replace("(", "").replace(")", "").replace("*", "")
        names[sym.lower()].add(pos)
        names[sym.rsplit(".", 1)[-1].lower()].add(pos)
    for r in symbol_table.defined(catalog.db, repo):
        pos = index.position.get(r["unit_id"])
        if pos is not None:
            names[r["name"].lower()].add(pos)
            names[r["qualified"].lower().replace("(", "").replace(")", "").replace("*", "")].add(
                pos
            )
    return {k: sorted(v) for k, v in names.items()}


def build(
    units: list[Unit], generation: int, known: dict[tuple[str, str], list[str]] | None = None
) -> RepoIndex:
    """Index a repository's units; ``known`` holds keyword documents of an earlier generation,
    by (file, content hash), so a one-file update tokenizes only that file's units."""
    ids = [u.id for u in units]
    known = known or {}
    documents: dict[tuple[str, str], list[str]] = {}
    docs = []
    for u in units:
        key = (u.file, u.content_hash)
        documents[key] = doc = known[key] if key in known else keyword_document(u)
        docs.append(doc)
    bm25 = None
    if any(docs):
        bm25 = bm25s.BM25()
        bm25.index([d or ["\u2205"] for d in docs], show_progress=False)
    symbols = [symbol_token_set(u) for u in units]
    by_token: dict[str, list[int]] = defaultdict(list)
    for i, toks in enumerate(symbols):
        for t in toks:
            by_token[t].append(i)
    return RepoIndex(
        generation=generation,
        units=units,
        ids=ids,
        position={u: i for i, u in enumerate(ids)},
        bm25=bm25,
        symbol_tokens=symbols,
        by_symbol_token=dict(by_token),
        documents=documents,
    )


def bm25_scores(index: RepoIndex, tokens: list[str], n: int) -> list[tuple[int, float]]:
    """Top ``n`` units by BM25 as (position, score)."""
    if index.bm25 is None or not tokens or not len(index):
        return []
    k = min(n, len(index))
    docs, scores = index.bm25.retrieve([tokens], k=k, show_progress=False)
    return [(int(d), float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


class IndexCache:
    """One RepoIndex per repository, rebuilt when the catalog's generation moves."""

    def __init__(self) -> None:
        self._indexes: dict[str, RepoIndex] = {}
        self._lock = threading.Lock()

    def get(self, catalog: Catalog, repo: str) -> RepoIndex:
        """The current index of a repository."""
        # generations restart at 0 when a name is registered again: key by registration too
        generation, registration = catalog.published(repo)
        with self._lock:
            cached = self._indexes.get(repo)
            if cached is not None and (cached.registration, cached.generation) == (
                registration,
                generation,
            ):
                return cached
            known = cached.documents if cached is not None else None
            index = build(catalog.units(repo), generation, known)
            index.registration = registration
            index.by_name = name_index(catalog, repo, index)
            for name, positions in index.by_name.items():
                for part in split_identifier(name.rsplit(".", 1)[-1]):
                    for pos in positions:  # constants inside blocks join the symbol route too
                        if stem(part) not in index.symbol_tokens[pos] and len(part) > 1:
                            index.symbol_tokens[pos] = index.symbol_tokens[pos] | {stem(part)}
                            index.by_symbol_token.setdefault(stem(part), []).append(pos)
            index.labels = cluster_labels(catalog, repo, index.ids)
            self._indexes[repo] = index
            return index

    def forget(self, repo: str) -> None:
        """Drop a repository's index."""
        with self._lock:
            self._indexes.pop(repo, None)


_cache = IndexCache()


def get_index_cache() -> IndexCache:
    """The process-wide index cache."""
    return _cache
