"""The unsafe-request reader (issue 41): multilingual-e5-small with the shipped LoRA adapter
merged into its linear layers, reading a question as ``e5-small`` reads one (``query: ``, its
first ``TOKENS`` tokens); the retriever's unsafe rule (``coderag_retriever.unsafe``) scores its
vector of the question in the query-only space ``coderag.spaces.UNSAFE``.

A rule on the frozen e5 vector learned words, not intent; fine-tuning the encoder on the
labelled requests lets it read what the question asks for (``python -m
coderag_training.fit.unsafe_tuned``, which writes ``ADAPTER`` and the rule's head). The reader
shares its embedding table with the query encoder of ``vector2`` (the adapter leaves the table
as it was), so it costs the encoder's layers, not a second 384 MB table.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from coderag import fitted
from coderag.errors import ConfigError
from coderag_embedder.e5_torch import TorchE5Encoder

ADAPTER = Path(__file__).with_name("unsafe_adapter.safetensors")
"""The shipped adapter: for each adapted linear layer ``NAME``, ``NAME.a`` (rank x in) and
``NAME.b`` (out x rank, its scaling folded in), fp16."""

TOKENS = 64
"""Tokens of a question read (``<s>`` and ``</s>`` included), as in training."""

_lock = threading.Lock()
_readers: dict[str, Any] = {}


def deltas(path: Path = ADAPTER) -> dict[str, np.ndarray]:
    """Each adapted layer's weight change (``b @ a``, fp32), by the layer's parameter name."""
    from safetensors.numpy import load_file

    parts = load_file(str(path))
    names = sorted({k.rsplit(".", 1)[0] for k in parts})
    out = {}
    for name in names:
        a, b = parts.get(f"{name}.a"), parts.get(f"{name}.b")
        if a is None or b is None:
            raise ConfigError(f"{path}: layer {name} lacks its 'a' or 'b' matrix")
        out[f"{name}.weight"] = b.astype(np.float32) @ a.astype(np.float32)
    return out


def reader(query_encoder: Any, model_dir: Path, device: str) -> Any | None:
    """The reader built on ``model_dir`` (the converted e5) beside ``query_encoder`` (in fp32,
    as it was trained, sharing the encoder's embedding table), once per process; None when no
    adapter ships or the query encoder is not e5 on torch (the retriever then keeps to the
    hand-written checks)."""
    if not ADAPTER.is_file() or not isinstance(query_encoder, TorchE5Encoder):
        return None
    with _lock:
        key = f"{model_dir}:{device}"
        if key not in _readers:
            fitted.verify(ADAPTER)  # the file its card describes, or no start
            _readers[key] = TorchE5Encoder(
                model_dir,
                device,
                max_tokens=TOKENS,
                # int8 cost it a fifth of the requests it declines on the tuning set at the
                # same false alarms (0.981 -> 0.955, docs/BENCHMARKS.md); one short question
                # in fp32 is a few milliseconds
                reduced=False,
                name="unsafe-reader",
                changes=deltas(),
                word_embeddings=query_encoder.model.embeddings.word_embeddings,
            )
        return _readers[key]
