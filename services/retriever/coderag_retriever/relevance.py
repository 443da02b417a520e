"""Whether the code holds the answer, decided once per question here and sent with the hits
(/search's ``below_gate``, /ask's refusal): the learned refusal rule where it applies, else the
cosine score gate (``coderag.gate``); never when the question names an identifier of the code.

The learned refusal rule: a logistic model of "the indexed code does not hold the answer" over
what retrieval says about a question (best cosine, the learned ranker's confidence in its first
hits, how many routes put the first hit near their top, how much of the question the top hits
mention). Fitted leave-one-corpus-out on the tuning split's answerable and absent questions by
``python -m coderag_training.fit.refusal``; shipped as ``refusal.json`` beside this module, with
its card (``refusal.card.json``), and read through ``coderag.fitted``.

A cosine gate alone does not carry over to code bases it was not fitted on (docs/BENCHMARKS.md):
absent and answerable questions differ by about 0.03 in median cosine, while the ranker's
confidence and the routes' agreement differ by far more."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from coderag import fitted, spaces, words
from coderag import gate as cosine
from coderag.gate import best_similarity, names_code
from coderag.language import STOP_EN, has_han
from coderag.routes import COSINE, VECTOR
from coderag.schemas import Hit
from coderag.settings import Settings
from coderag_retriever.text import zh_terms, zh_words

MODEL_FILE = Path(__file__).with_name("refusal.json")
"""The shipped model (features, standardisation, weights, threshold, what it was fitted on)."""

LEXICAL_MODEL_FILE = Path(__file__).with_name("refusal_lexical.json")
"""The model for a repository whose vectors are still being written: fitted on the tuning
split's hits ranked without the vector routes (``coderag_training.fit.refusal --lexical``)."""

TOP = 3
"""Hits whose support counts, and the rank within which a route "agrees" on the first hit."""

FEATURES = (
    "similarity",
    "confidence",
    "confidence_gap",
    "support",
    "chinese",
    "routes_agree",
    "similarity_lead",
    "keyword_top",
    "vector_top",
    "vector2_top",
)
"""What the model reads of one question's hits, in its weights' order."""


@dataclass(frozen=True)
class Model:
    """A fitted logistic rule: refuse when p(absent) is at least ``threshold``."""

    encoder: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float
    zh_words: bool = False
    """Whether ``support`` counts a Chinese question's English words as its own (see
    ``english``): the model is applied as it was fitted."""
    doubt: float | None = None
    """p(absent) from which an answer that is not refused says the code may not contain what
    was asked (chosen on the tuning split by ``coderag_training.fit.refusal --doubt``); None:
    never."""

    def p_absent(self, values: dict[str, float]) -> float:
        """Probability that the code does not hold the answer."""
        z = self.bias
        for name, mu, sd, w in zip(self.features, self.mean, self.scale, self.weights, strict=True):
            z += w * (values[name] - mu) / sd
        return fitted.sigmoid(z)


def english(query: str, settings: Settings) -> list[str]:
    """The English words the search gives a Chinese question (none for other questions): what
    its Chinese asks for in the code's words, so ``support`` can read a Chinese question as
    words, not as whole phrases no code contains."""
    return zh_terms(query, settings.zh_vocab, settings.zh_dictionary) if has_han(query) else []


def looked_for(query: str, settings: Settings) -> list[str]:
    """What the search looked for, to tell a user whose question was refused: the question's
    content words, and each Chinese word with the English it was searched by (``订单 (order)``),
    never a whole Chinese phrase no code could contain."""
    latin = [w for w in words.WORD.findall(query) if w.lower() not in STOP_EN]
    if not has_han(query):
        return list(dict.fromkeys(latin))
    chinese = [
        f"{zh} ({', '.join(english)})"
        for zh, english in zh_words(query, settings.zh_vocab, settings.zh_dictionary)
    ]
    return list(dict.fromkeys([*chinese, *latin]))


def features(query: str, hits: Sequence[Hit], extra: Sequence[str] = ()) -> dict[str, float]:
    """The model's inputs for a question and its ranked hits (with code and doc); ``extra``
    words count as the question's own (``english``)."""
    wanted = words.terms(query, extra)
    conf = [float(h.confidence or 0.0) for h in hits]
    sims = [float(h.similarity or 0.0) for h in hits[:10]]
    routes = hits[0].routes if hits else {}

    def top(route: str) -> float:
        return float(route in routes and routes[route] <= TOP)

    return {
        "similarity": best_similarity(hits),
        "confidence": conf[0] if conf else 0.0,
        "confidence_gap": conf[0] - conf[1] if len(conf) > 1 else 0.0,
        "support": max((words.support(wanted, h) for h in hits[:TOP]), default=0.0),
        "chinese": float(has_han(query)),
        "routes_agree": sum(1 for rank in routes.values() if rank <= TOP) / 5,
        "similarity_lead": sims[0] - sum(sims) / len(sims) if sims else 0.0,
        "keyword_top": top("keyword"),
        **{f"{r}_top": top(r) for r in COSINE},
    }


@cache
def _load(path: str) -> Model | None:
    raw = fitted.load(Path(path))
    if raw is None:
        return None
    return Model(
        encoder=raw.text("encoder"),
        features=raw.texts("features"),
        mean=raw.numbers("mean"),
        scale=raw.numbers("scale"),
        weights=raw.numbers("weights"),
        bias=raw.number("bias"),
        threshold=raw.number("threshold"),
        zh_words=raw.flag("zh_words", False),
        doubt=raw.optional_number("doubt"),
    )


def model_for(settings: Settings, lexical: bool = False) -> Model | None:
    """The shipped model when it applies: the learned rule chosen, no score gate set by hand,
    and the gate reading the encoder the model was fitted with; else None (the cosine gate).
    ``lexical``: the model for a repository whose vectors are still being written."""
    if settings.refusal_rule != "learned" or settings.score_gate is not None:
        return None
    m = _load(str(LEXICAL_MODEL_FILE if lexical else MODEL_FILE))
    # fitted on one encoder's similarities: it applies only where the gate reads that encoder
    route = cosine.space(settings)
    if m is None or route is None or spaces.encoder(VECTOR[route], settings) != m.encoder:
        return None
    return m


JUDGED = 10
"""Hits the verdict reads, however many the caller asked for: /search and /ask agree."""


@dataclass(frozen=True)
class Verdict:
    """Whether the hits probably do not hold the answer (``below``: refuse), and, when they
    may, whether the rule still doubts it (``doubtful``: the answer says so)."""

    below: bool
    doubtful: bool = False
    p_absent: float | None = None
    """The learned rule's probability that the code does not hold the answer (None: the cosine
    gate, or a verdict that did not need it)."""
    weak: bool = True
    """Whether the hits are weak enough that a word of the question no hit mentions refuses
    (``CODERAG_ABSENT_TERM_FLOOR``); without the learned rule, always (as before issue 41)."""


def verdict(query: str, hits: Sequence[Hit], settings: Settings, lexical: bool = False) -> Verdict:
    """The verdict on the hits (best first, with code and doc): the learned rule's where it
    applies (``lexical``: the one fitted for a repository whose vector routes do not run yet),
    else the best cosine under the score gate, which never doubts; never below for no hits
    (that is its own answer), a question naming an identifier of the code, or a gate of 0."""
    hits = hits[:JUDGED]
    if not hits or names_code(hits):
        return Verdict(False, weak=False)
    learned = model_for(settings, lexical)
    # with no vector route running there is no cosine: only a rule fitted on that state decides
    gate = cosine.threshold(settings) if learned is not None or not lexical else 0.0
    if learned is None or gate <= 0:
        return Verdict(cosine.below_gate(hits, gate))
    extra = english(query, settings) if learned.zh_words else []
    p = learned.p_absent(features(query, hits, extra))
    below = p >= learned.threshold
    doubtful = not below and learned.doubt is not None and p >= learned.doubt
    return Verdict(below, doubtful, p, below or p >= settings.absent_term_floor)
