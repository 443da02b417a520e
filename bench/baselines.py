"""The retrieval benchmark's baselines: BM25 over coderag's units and plain vector RAG over
1000-character chunks with 200 overlap (seed 003), in the same run as coderag's search."""

from __future__ import annotations

import time
from pathlib import Path

import bm25s
import numpy as np

from coderag.store import get_catalog
from coderag_embedder.encoder import get_encoders
from coderag_parser.files import indexable, read_source, walk

CHUNK_CHARS, CHUNK_OVERLAP = 1000, 200
"""The plain-RAG baseline's chunking (seed 003)."""

K = 10
"""Depth of every ranking."""


def chunks(root: Path) -> list[tuple[str, int, int, str]]:
    """1000-character chunks with 200 overlap of every indexable file: (file, start, end, text)."""
    out = []
    for rel in walk(root):
        if indexable(rel) is None:
            continue
        text, _ = read_source(root / rel, 1_000_000)
        if not text:
            continue
        step = CHUNK_CHARS - CHUNK_OVERLAP
        for start in range(0, max(len(text) - CHUNK_OVERLAP, 1), step):
            piece = text[start : start + CHUNK_CHARS]
            first = text.count("\n", 0, start) + 1
            out.append((rel, first, first + piece.count("\n"), piece))
    return out


class Baselines:
    """BM25 over coderag's units and vector search over plain chunks."""

    def __init__(self, repo: str, root: Path, spaces: tuple[str, ...] | None = None) -> None:
        units = get_catalog().units(repo)
        self.units = [(u.file, u.start_line, u.end_line) for u in units]
        self.bm25 = bm25s.BM25()
        self.bm25.index(
            bm25s.tokenize([u.text for u in units], stopwords="en", show_progress=False),
            show_progress=False,
        )
        t = time.perf_counter()
        self.chunks = chunks(root)
        self.encoders = {k: v for k, v in get_encoders().items() if spaces is None or k in spaces}
        self.chunk_vecs = {
            space: enc.encode([c[3] for c in self.chunks]) for space, enc in self.encoders.items()
        }
        self.chunk_embed_s = time.perf_counter() - t

    def bm25_rank(self, query: str) -> list[tuple[str, int, int]]:
        """Top units by plain BM25."""
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self.bm25.retrieve(tokens, k=min(K, len(self.units)), show_progress=False)
        return [self.units[d] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def vector_rank(self, query: str, space: str = "vector") -> list[tuple[str, int, int]]:
        """Top chunks by cosine similarity under one encoder."""
        q = self.encoders[space].encode_query([query])[0]
        order = np.argsort(-(self.chunk_vecs[space] @ q))[:K]
        return [self.chunks[i][:3] for i in order]
