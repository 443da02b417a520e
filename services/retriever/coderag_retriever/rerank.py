"""Optional cross-encoder rerank (R7) of the fused top 50, from a local model directory.

No PyPI package ships a trained code cross-encoder, so this is off unless
``CODERAG_RERANK_MODEL`` names one (any HF sequence-classification model that scores a
(question, code) pair with its first logit)."""

from __future__ import annotations

import threading
from functools import cache
from pathlib import Path

from coderag.errors import ConfigError
from coderag.schemas import Unit

MAX_LENGTH = 512
"""Tokens of question plus code the cross-encoder reads."""

_lock = threading.Lock()


@cache
def _load(model_dir: str):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = Path(model_dir)
    if not (path / "config.json").is_file():
        raise ConfigError(f"CODERAG_RERANK_MODEL={model_dir} is not a model directory")
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
    return tok, model


def rerank(model_dir: str, query: str, units: list[Unit], order: list[int]) -> list[int]:
    """``order`` (positions of ``units``) sorted by the cross-encoder's score."""
    import torch

    with _lock:
        tok, model = _load(model_dir)
        with torch.inference_mode():
            batch = tok(
                [query] * len(units),
                [u.text for u in units],
                padding=True,
                truncation=True,
                max_length=MAX_LENGTH,
                return_tensors="pt",
            )
            logits = model(**batch).logits[:, 0].tolist()
    ranked = sorted(zip(logits, order, strict=True), key=lambda t: -t[0])
    return [p for _, p in ranked]
