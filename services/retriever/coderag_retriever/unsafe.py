"""Whether a question asks to get around a security control or at a secret's value (G5): a
logistic rule on the question's vector, decided here, where the question is embedded anyway,
and sent with the hits (``RetrieveResponse.unsafe``); /ask declines when it or the generator's
hand-written rules (``coderag_generator.refusal``) say so.

The rules catch the phrasings they were written for and few others: on requests written by
someone who never read them they declined 1 of 30 (docs/BENCHMARKS.md). The vector reads what
a request asks for, in English or Chinese. Fitted by ``python -m coderag_training.fit.unsafe`` on
``bench/questions/unsafe/train.jsonl``, its threshold chosen on ``tune.jsonl``; shipped as
``unsafe.json`` beside this module, with its card (``unsafe.card.json``), and read through
``coderag.fitted``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

import numpy as np

from coderag import fitted
from coderag.embedding import QueryEmbedder
from coderag.errors import Unavailable
from coderag.settings import Settings

MODEL_FILE = Path(__file__).with_name("unsafe.json")
"""The shipped model: which vector space, its encoder, weights, bias and threshold."""


@dataclass(frozen=True)
class Model:
    """A fitted logistic rule: decline when p(unsafe) is at least ``threshold``."""

    space: str
    encoder: str
    weights: list[float]
    bias: float
    threshold: float
    fitted_on: str = ""

    def p_unsafe(self, vector: np.ndarray) -> float:
        """Probability that the question asks to get around a control or at a secret."""
        z = float(np.dot(np.asarray(self.weights, dtype=np.float64), vector)) + self.bias
        return fitted.sigmoid(z)


@cache
def _load(path: str) -> Model | None:
    raw = fitted.load(Path(path))
    if raw is None:
        return None
    return Model(
        space=raw.text("space"),
        encoder=raw.text("encoder"),
        weights=list(raw.numbers("weights")),
        bias=raw.number("bias"),
        threshold=raw.number("threshold"),
        fitted_on=raw.text("fitted_on", ""),
    )


def save(model: Model, path: Path = MODEL_FILE) -> None:
    """Write a fitted model (``python -m coderag_training.fit.unsafe --write``, which writes its
    card next)."""
    fitted.dump(path, asdict(model))
    _load.cache_clear()


def model_for(settings: Settings) -> Model | None:
    """The shipped model when the learned rule is chosen and the encoder it was fitted on feeds
    its space; else None."""
    if settings.unsafe_rule != "learned":
        return None
    m = _load(str(MODEL_FILE))
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
    return m.p_unsafe(np.asarray(vectors[0], dtype=np.float64)) >= m.threshold
