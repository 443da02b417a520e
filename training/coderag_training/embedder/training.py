"""The contrastive training loop: NT-Xent over pooled encoder outputs, AdamW with linear warmup
and decay, gradient accumulation and a global grad-norm clip, saved as a local model directory."""

from __future__ import annotations

import json
import math
import random
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from coderag_training.embedder.pairs import Pair, head_of

SUMMARY_FILE = "coderag-finetune.json"
"""Name of the parameters / loss-curve record written next to the fine-tuned weights."""


def nt_xent(
    anchors: Any, positives: Any, negatives: Any, keys: Sequence[str], temperature: float
) -> Any:
    """NT-Xent over L2-normalised rows: each anchor and each positive must pick its partner among
    all other anchors, positives and the explicit negatives. ``keys`` names the function behind
    every row (anchors, then positives, then negatives); rows sharing the query's key other than
    its partner are masked, so another version of the same function is never a negative."""
    import torch

    b = anchors.shape[0]
    z = torch.cat([anchors, positives, negatives], dim=0)
    queries = z[: 2 * b]
    logits = queries @ z.T / temperature
    dev = logits.device
    rows = torch.arange(2 * b, device=dev)
    target = torch.cat([rows[b:], rows[:b]])
    ids: dict[str, int] = {}
    codes = torch.tensor([ids.setdefault(k, len(ids)) for k in keys], device=dev)
    same = codes[: 2 * b, None] == codes[None, :]
    same[rows, target] = False
    same[rows, rows] = True
    logits = logits.masked_fill(same, float("-inf"))
    return torch.nn.functional.cross_entropy(logits, target)


def pool(hidden: Any, mask: Any, pooling: str) -> Any:
    """Sentence vectors as ``Encoder`` computes them: mean over tokens or the first token."""
    import torch

    if pooling == "cls":
        vec = hidden[:, 0]
    else:
        m = mask.unsqueeze(-1).to(hidden.dtype)
        vec = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(vec.float(), dim=-1)


def _effective_length(config: Any, max_length: int) -> int:
    limit = getattr(config, "max_position_embeddings", max_length)
    if config.model_type in ("roberta", "xlm-roberta"):
        limit -= 2  # RoBERTa positions start after the padding index
    return min(max_length, limit)


def lr_factor(step: int, total: int, warmup_steps: int) -> float:
    """Linear warmup to 1 over ``warmup_steps``, then linear decay to 0 at ``total``."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return max(0.0, (total - step) / max(1, total - warmup_steps))


def _device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _micro_batches(
    pairs: Sequence[Pair], batch_size: int, rng: random.Random
) -> Iterable[list[Pair]]:
    """Endless shuffled micro-batches: every pair once per epoch."""
    while True:
        order = list(pairs)
        rng.shuffle(order)
        for i in range(0, len(order), batch_size):
            yield order[i : i + batch_size]


def train(
    model_dir: str | Path,
    pairs: Sequence[Pair],
    out_dir: str | Path,
    *,
    steps: int = 2000,
    batch_size: int = 8,
    accumulation: int = 4,
    lr: float = 2e-5,
    warmup: float = 0.1,
    temperature: float = 0.07,
    max_grad_norm: float = 1.0,
    weight_decay: float = 0.01,
    negatives_per_pair: int = 2,
    pooling: str = "mean",
    max_length: int = 256,
    seed: int = 0,
    device: str = "auto",
    log_every: int = 0,
) -> dict[str, Any]:
    """Fine-tune the encoder in ``model_dir`` on ``pairs`` with NT-Xent and save it (model,
    tokenizer and ``coderag-finetune.json``) into ``out_dir``; returns that summary."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if not pairs:
        raise ValueError("no training pairs: the history has no changed functions to learn from")
    if steps < 1 or batch_size < 1 or accumulation < 1:
        raise ValueError("steps, batch_size and accumulation must be positive")
    hf_logging.set_verbosity_error()
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    dev = _device(device)
    random.seed(seed)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModel.from_pretrained(model_dir, local_files_only=True).to(dev)
    model.train()
    length = _effective_length(model.config, max_length)
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if param.requires_grad:
            plain = param.ndim < 2 or "norm" in name.lower() or name.endswith(".bias")
            (no_decay if plain else decay).append(param)
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=lr,
    )
    warmup_steps = max(1, math.ceil(warmup * steps))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, steps, warmup_steps)
    )
    params = [p for group in optimizer.param_groups for p in group["params"]]

    def embed(texts: list[str]) -> Any:
        batch = tokenizer(
            texts, padding=True, truncation=True, max_length=length, return_tensors="pt"
        ).to(dev)
        hidden = model(**batch).last_hidden_state
        return pool(hidden, batch["attention_mask"], pooling)

    batches = iter(_micro_batches(pairs, batch_size, rng))
    losses: list[float] = []
    lrs: list[float] = []
    norms: list[float] = []
    started = time.monotonic()
    for step in range(steps):
        step_loss = 0.0
        for _ in range(accumulation):
            chunk = next(batches)
            negatives: list[str] = []
            for p in chunk:
                candidates = p.all_negatives()
                negatives += rng.sample(candidates, min(negatives_per_pair, len(candidates)))
            anchors = [p.anchor for p in chunk]
            positives = [p.positive for p in chunk]
            vecs = embed(anchors + positives + negatives)
            b = len(chunk)
            keys = [head_of(t) for t in anchors] * 2 + [head_of(t) for t in negatives]
            loss = nt_xent(vecs[:b], vecs[b : 2 * b], vecs[2 * b :], keys, temperature)
            (loss / accumulation).backward()
            step_loss += float(loss.detach()) / accumulation
        norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(step_loss)
        norms.append(float(norm))
        if log_every and (step + 1) % log_every == 0:
            recent = losses[-log_every:]
            print(
                f"step {step + 1}/{steps} loss {sum(recent) / len(recent):.4f} "
                f"lr {lrs[-1]:.2e} grad-norm {norms[-1]:.3f} "
                f"({time.monotonic() - started:.0f}s)",
                file=sys.stderr,
                flush=True,
            )
    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    summary: dict[str, Any] = {
        "base_model": str(model_dir),
        "out_dir": str(out_dir),
        "device": dev,
        "pairs": len(pairs),
        "functions": len({p.key for p in pairs}),
        "params": {
            "loss": "nt-xent",
            "steps": steps,
            "batch_size": batch_size,
            "accumulation": accumulation,
            "effective_batch": batch_size * accumulation,
            "lr": lr,
            "optimizer": "adamw",
            "weight_decay": weight_decay,
            "warmup": warmup,
            "warmup_steps": warmup_steps,
            "schedule": "linear warmup, linear decay",
            "temperature": temperature,
            "max_grad_norm": max_grad_norm,
            "negatives_per_pair": negatives_per_pair,
            "pooling": pooling,
            "max_length": length,
            "seed": seed,
        },
        "loss_curve": losses,
        "lr_curve": lrs,
        "grad_norm_pre_clip": norms,
        "clipped_steps": sum(n > max_grad_norm for n in norms),
        "seconds": round(time.monotonic() - started, 2),
    }
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    return summary
