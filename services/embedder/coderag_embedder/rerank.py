"""Optional cross-encoder (R7) that reranks the retriever's fused top 50, from a local model
directory; it runs here, beside the other models, so the retriever needs no torch.

No PyPI package ships a trained code cross-encoder, so this is off unless
``CODERAG_RERANK_MODEL`` names one (any HF sequence-classification model that scores a
(question, code) pair with its first logit)."""

from __future__ import annotations

import threading
from functools import cache
from pathlib import Path
from typing import Any

from coderag.errors import ConfigError

MAX_LENGTH = 512
"""Tokens of question plus code the cross-encoder reads."""

_lock = threading.Lock()


@cache
def _load(model_dir: str) -> tuple[Any, Any]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = Path(model_dir)
    if not (path / "config.json").is_file():
        raise ConfigError(f"CODERAG_RERANK_MODEL={model_dir} is not a model directory")
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
    return tok, model


def score(model_dir: str, query: str, texts: list[str]) -> list[float]:
    """The cross-encoder's first logit for each (query, text) pair."""
    import torch

    if not texts:
        return []
    with _lock:
        tok, model = _load(model_dir)
        with torch.inference_mode():
            batch = tok(
                [query] * len(texts),
                list(texts),
                padding=True,
                truncation=True,
                max_length=MAX_LENGTH,
                return_tensors="pt",
            )
            return [float(x) for x in model(**batch).logits[:, 0].tolist()]
