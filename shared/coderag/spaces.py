"""The vector spaces, named once: each names the setting of the encoder that fills it and its
collections' name prefix; the chain's stages, the collections, the health report, the score
gate's encoder and the routes that read vectors (``coderag.routes``) derive from ``REGISTRY``.
A new space is a row here, a ``Route`` reading it and the settings of its encoder."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Space:
    """One vector space: its name, the ``Settings`` field naming its encoder, the prefix of its
    collections' names, and whether every index fills it (else only when its encoder is set)."""

    name: str
    model: str
    prefix: str
    always: bool = False


REGISTRY = (
    Space("vector", model="embed_model", prefix="repo_", always=True),
    Space("vector2", model="embed_model_2", prefix="vector2_"),
)
"""Every space; the first is the main one."""

BY_NAME = {s.name: s for s in REGISTRY}
"""Each space by its name."""

NAMES = tuple(BY_NAME)
"""Space names."""

MAIN = REGISTRY[0].name
"""The main space, which every index fills (the default wherever a space is not named)."""

UNSAFE = "unsafe"
"""A query-only space, outside the registry (no collection, no index fills it): the unsafe
reader's vectors of questions, which the retriever's unsafe rule scores."""

PREFIXES = {s.name: s.prefix for s in REGISTRY}
"""Collection-name prefix per space (distinct, so no two collections share a name)."""


def encoder(space: str, settings: object) -> str:
    """The encoder ``settings`` (a ``coderag.settings.Settings``, which imports this module)
    names for a space ("" when none is set)."""
    return str(getattr(settings, BY_NAME[space].model) or "")


def filled(settings: object) -> list[str]:
    """The spaces the embedder fills under ``settings`` (as ``encoder``), in registry order."""
    return [s.name for s in REGISTRY if s.always or encoder(s.name, settings)]
