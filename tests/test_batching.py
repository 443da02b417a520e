"""Speed changes keep the vectors: length-sorted batches give every text the vector it gets
alone, in the input order, with both packaged encoders."""

from __future__ import annotations

import numpy as np
import pytest

from coderag.settings import Settings
from coderag_embedder.batching import length_batches
from coderag_embedder.encoder import get_encoders

TEXTS = [
    "def total(order):\n    return sum(i.price for i in order.items)\n" * 6,
    "x = 1",
    'func (s *Service) Name() string { return "orders" }',
    "class Refund:\n    '''Money back.'''\n    amount: int\n",
    "订单是在哪里创建的？",
]


def test_length_batches_cover_every_position_shortest_first() -> None:
    batches = length_batches(TEXTS, 2)
    assert sorted(i for b in batches for i in b) == list(range(len(TEXTS)))
    assert [len(b) for b in batches] == [2, 2, 1]
    lengths = [len(TEXTS[i]) for b in batches for i in b]
    assert lengths == sorted(lengths)
    assert length_batches([], 3) == []


@pytest.mark.slow
def test_sorted_batches_keep_each_texts_vector() -> None:
    for space, enc in get_encoders(Settings(embed_batch_size=2)).items():
        together = enc.encode(TEXTS)
        alone = np.concatenate([enc.encode([t]) for t in TEXTS])
        if space == "vector2":
            assert np.array_equal(together, alone)  # the C engine packs without padding
        else:
            np.testing.assert_allclose(together, alone, atol=1e-5)
        assert enc.encode([]).shape == (0, enc.dim)
