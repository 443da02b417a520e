"""Whether a question asks to get around a security control or at a secret's value (G5): a
logistic head on a question's vector, decided here, where the question is embedded anyway, and
sent with the hits (``RetrieveResponse.unsafe``); /ask declines when it or the generator's
hand-written rules (``coderag_generator.refusal``) say so.

The default rule (``unsafe.json``) is a logistic regression on the question's e5 vector beside
its terms (``terms``: letter n-grams and word pairs, TF-IDF weighted), fitted by ``python -m
coderag_training.fit.unsafe``. ``CODERAG_UNSAFE_RULE=tuned`` reads the space ``unsafe``
instead: multilingual-e5-small fine-tuned with a LoRA adapter to read what a request asks for
(the embedder's ``coderag_embedder.unsafe``), its head in ``unsafe_tuned.json``, fitted by
``python -m coderag_training.fit.unsafe_tuned``; on the frozen sets it declines as many unsafe
requests with fewer benign look-alikes but more ordinary questions (docs/BENCHMARKS.md), so it
is not the default. Each file ships with its card and is read through ``coderag.fitted``. A
model without a vocabulary scores its vector alone.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache, cached_property
from itertools import pairwise
from pathlib import Path

import numpy as np

from coderag import fitted
from coderag.embedding import QueryEmbedder
from coderag.errors import Unavailable
from coderag.settings import Settings

MODEL_FILE = Path(__file__).with_name("unsafe.json")
"""The shipped model: which vector space, its encoder, weights, bias, threshold and terms."""

TUNED_FILE = Path(__file__).with_name("unsafe_tuned.json")
"""The fine-tuned reader's head (``CODERAG_UNSAFE_RULE=tuned``): space ``unsafe``."""

CHAR_NGRAMS = (2, 4)
"""Shortest and longest letter n-gram of a word (scikit-learn's ``char_wb`` analyzer)."""

FAMILIES = ("c:", "w:")
"""The term families, each L2-normalised on its own: letter n-grams and words (with pairs)."""

_WORD = re.compile(r"(?u)\b\w+\b")


def terms(query: str) -> dict[str, int]:
    """Each term of the lowercased question and how often it occurs: ``c:`` letter n-grams
    (2 to 4) of each whitespace-separated word padded with a space on each side, ``w:`` words
    and adjacent word pairs (the trainer and this rule read the same terms)."""
    text = query.lower()
    counts: Counter[str] = Counter()
    low, high = CHAR_NGRAMS
    for word in text.split():
        padded = f" {word} "
        for n in range(low, min(high, len(padded)) + 1):
            counts.update(f"c:{padded[i : i + n]}" for i in range(len(padded) - n + 1))
    words = _WORD.findall(text)
    counts.update(f"w:{w}" for w in words)
    counts.update(f"w:{a} {b}" for a, b in pairwise(words))
    return dict(counts)


def weighted(
    bag: Mapping[str, int], index: Mapping[str, int], idf: Sequence[float]
) -> dict[int, float]:
    """A question's term features by vocabulary position: (1 + ln count) * idf for each term
    of the vocabulary it holds, L2-normalised within each family (terms outside it count for
    nothing, so a question of unknown words scores on its vector alone)."""
    out: dict[int, float] = {}
    for family in FAMILIES:
        part = {
            index[t]: (1.0 + math.log(n)) * idf[index[t]]
            for t, n in bag.items()
            if t.startswith(family) and t in index
        }
        norm = math.sqrt(sum(v * v for v in part.values()))
        out.update({i: v / norm for i, v in part.items()} if norm > 0 else {})
    return out


@dataclass(frozen=True)
class Model:
    """A fitted logistic rule: decline when p(unsafe) is at least ``threshold``."""

    space: str
    encoder: str
    weights: list[float]
    bias: float
    threshold: float
    fitted_on: str = ""
    vocabulary: list[str] = field(default_factory=list)
    idf: list[float] = field(default_factory=list)
    term_weights: list[float] = field(default_factory=list)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.vocabulary)}

    def term_score(self, query: str) -> float:
        """What the question's terms add to the logistic score (0 for a vector-only model)."""
        if not self.vocabulary:
            return 0.0
        x = weighted(terms(query), self._index, self.idf)
        return math.fsum(self.term_weights[i] * v for i, v in x.items())

    def p_unsafe(self, vector: np.ndarray, query: str | None = None) -> float:
        """Probability that the question asks to get around a control or at a secret, from its
        vector and, for a model with a vocabulary, its text (required then)."""
        if self.vocabulary and query is None:
            # without its terms the score would be a different, uncalibrated rule
            raise ValueError("this unsafe model reads the question's terms: pass the query")
        z = float(np.dot(np.asarray(self.weights, dtype=np.float64), vector)) + self.bias
        return fitted.sigmoid(z + (self.term_score(query) if query is not None else 0.0))


def _optional(raw: fitted.Fields, key: str) -> bool:
    """Whether a key that older models lack is there (``Fields`` requires every list)."""
    return key in raw.raw


@cache
def _load(path: str) -> Model | None:
    raw = fitted.load(Path(path))
    if raw is None:
        return None
    vocabulary = list(raw.texts("vocabulary")) if _optional(raw, "vocabulary") else []
    idf = list(raw.numbers("idf")) if _optional(raw, "idf") else []
    term_weights = list(raw.numbers("term_weights")) if _optional(raw, "term_weights") else []
    if not len(vocabulary) == len(idf) == len(term_weights):
        raise fitted.FittedModelError(
            f"{path}: 'vocabulary', 'idf' and 'term_weights' must be as long as each other "
            f"({len(vocabulary)}, {len(idf)}, {len(term_weights)})"
        )
    return Model(
        space=raw.text("space"),
        encoder=raw.text("encoder"),
        weights=list(raw.numbers("weights")),
        bias=raw.number("bias"),
        threshold=raw.number("threshold"),
        fitted_on=raw.text("fitted_on", ""),
        vocabulary=vocabulary,
        idf=idf,
        term_weights=term_weights,
    )


def load_model(path: Path | None = None) -> Model | None:
    """A fitted model file (the shipped one, ``MODEL_FILE`` as it is when called, by default);
    None where there is none."""
    return _load(str(path or MODEL_FILE))


def save(model: Model, path: Path = MODEL_FILE) -> None:
    """Write a fitted model (``python -m coderag_training.fit.unsafe --write``, which writes its
    card next)."""
    fitted.dump(path, asdict(model))
    _load.cache_clear()


def model_for(settings: Settings) -> Model | None:
    """The shipped model of the chosen rule (``learned``: the logistic rule, ``tuned``: the
    fine-tuned reader's head) when the encoder it was fitted on feeds its space; else None."""
    if settings.unsafe_rule == "rules":
        return None
    m = load_model(TUNED_FILE if settings.unsafe_rule == "tuned" else MODEL_FILE)
    if m is None or m.encoder != settings.embed_model_2 or not m.encoder:
        return None
    return m


def declines(query: str, settings: Settings, embedder: QueryEmbedder) -> bool:
    """Whether the learned rule declines the question; False when it does not apply or the
    embedder cannot say (the generator's rules still run)."""
    m = model_for(settings)
    if m is None:
        return False
    try:
        vectors = embedder.embed_queries(m.space, [query])
    except Unavailable:
        return False
    if vectors is None or len(vectors) != 1:
        return False
    return m.p_unsafe(np.asarray(vectors[0], dtype=np.float64), query) >= m.threshold
