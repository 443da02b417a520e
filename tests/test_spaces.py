"""The vector spaces named once (issue 32): every list of spaces derives from
``coderag.spaces.REGISTRY`` (pure logic; the chain and the collections are tested through real
indexes elsewhere)."""

from __future__ import annotations

from coderag import chain, gate, routes, spaces
from coderag.settings import Settings
from coderag.store import vectors


def test_each_space_has_an_encoder_setting_a_route_and_its_own_prefix() -> None:
    fields = Settings.model_fields
    assert all(s.model in fields for s in spaces.REGISTRY)
    assert set(routes.VECTOR.values()) == set(spaces.NAMES)
    assert len(set(spaces.PREFIXES.values())) == len(spaces.REGISTRY)
    assert vectors.SPACE_PREFIXES == spaces.PREFIXES and vectors.COLLECTION_PREFIX == "repo_"


def test_the_spaces_filled_follow_the_encoders_set() -> None:
    one = Settings(embed_model_2="")
    both = Settings(embed_model_2="e5-small")
    assert chain.spaces(one) == spaces.filled(one) == ["vector"]
    assert chain.spaces(both) == ["vector", "vector2"]
    assert spaces.encoder("vector2", both) == "e5-small" and spaces.encoder("vector2", one) == ""
    # the gate's calibrated value follows the encoder of the space it reads
    assert gate.threshold(Settings()) == gate.threshold(Settings(score_gate=None)) > 0
