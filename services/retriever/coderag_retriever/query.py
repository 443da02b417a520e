"""A parsed query: its tokens for the keyword and symbol routes and, on demand, its embedding."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

import numpy as np

from coderag import spaces
from coderag.embedding import QueryEmbedder, query_embedder
from coderag_retriever.text import Known, has_chinese, query_tokens, without_name, zh_terms

TEST_WORDS = re.compile(
    r"\btest|\bspec\b|\bexpect|\bsupposed to\b|\bshould\b|测试|用例|预期|应该", re.IGNORECASE
)
"""Words that show a question is about tests (R9: otherwise tests are down-weighted)."""


@dataclass
class Query:
    """A question about one repository; ``known`` (the repository's code tokens) lets the
    dictionary's English for its Chinese be the words the code uses."""

    repo: str
    text: str
    vocab: bool = True
    dictionary: bool = False
    embedder: QueryEmbedder | None = field(default=None, repr=False)
    known: Known | None = field(default=None, repr=False)
    tokens: list[str] = field(init=False)
    lowered: str = field(init=False)
    about_tests: bool = field(init=False)
    candidates: list[int] = field(default_factory=list, init=False)
    rankings: dict[str, list[tuple[int, float]]] = field(default_factory=dict, init=False)
    _vectors: dict[str, np.ndarray | None] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        tokens = query_tokens(self.text, self.vocab, self.dictionary, self.known)
        self.tokens = without_name(tokens, self.repo, self.text)
        self.lowered = self.text.lower()
        self.about_tests = bool(TEST_WORDS.search(self.text))

    def after(self, rankings: dict[str, list[tuple[int, float]]]) -> Query:
        """This query with what the routes that ran found (their candidates, by position, and
        rankings), for the routes that read them; it shares this one's vectors."""
        found = copy.copy(self)
        found.candidates = sorted({p for ranked in rankings.values() for p, _ in ranked})
        found.rankings = dict(rankings)
        return found

    def embedding_text(self) -> str:
        """What the encoder reads: the question plus English words for its Chinese."""
        if (self.vocab or self.dictionary) and has_chinese(self.text):
            english = zh_terms(self.text, self.vocab, self.dictionary, self.known)
            return f"{self.text} ({' '.join(english)})"
        return self.text

    def vector(self, space: str = spaces.MAIN) -> np.ndarray | None:
        """The query's embedding in a vector space, computed once; None when no encoder feeds
        that space."""
        if space not in self._vectors:
            embedder = self.embedder or query_embedder()
            vectors = embedder.embed_queries(space, [self.embedding_text()])
            self._vectors[space] = None if vectors is None else vectors[0]
        return self._vectors[space]
