"""The LoRA adapter and its training loop: a local base model with a peft adapter on the attention
q/v projections, trained by AdamW with warmup and decay, loss on the answer tokens only."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coderag_generator.chat_tokens import IGNORE, collate, encode, end_of_turn
from coderag_generator.samples import Sample

if TYPE_CHECKING:
    import torch
    from peft import LoraConfig

LORA_R = 8
"""LoRA rank."""

LORA_ALPHA = 16
"""LoRA scaling numerator (the update is scaled by alpha / r)."""

LORA_DROPOUT = 0.1
"""Dropout on the LoRA input during training."""

LORA_TARGETS = ("q_proj", "v_proj")
"""Modules that get an adapter: the attention query and value projections."""

STEPS = 500
"""Default optimizer steps (sized for a GPU; see bench/finetune_generator.py for CPU)."""


def lora_config() -> LoraConfig:
    """The adapter configuration of G6."""
    from peft import LoraConfig

    return LoraConfig(
        r=LORA_R,
        lora_alpha=LORA_ALPHA,
        lora_dropout=LORA_DROPOUT,
        target_modules=list(LORA_TARGETS),
        bias="none",
        task_type="CAUSAL_LM",
    )


def pick_device(choice: str) -> str:
    """``cuda`` when asked for or (``auto``) present, else ``cpu``."""
    import torch

    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda, but torch sees no CUDA device")
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return choice


def load_base(model_dir: Path, device: str) -> tuple[Any, Any]:
    """A local causal LM (bf16 on CUDA, fp32 on CPU) and its tokenizer; never a hub download."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    if not tokenizer.chat_template:
        raise SystemExit(f"the tokenizer in {model_dir} has no chat template")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, local_files_only=True, dtype=dtype, device_map=device
    )
    return model, tokenizer


def answer_loss(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy over the answer tokens; the LM head runs on the answer positions only
    (a 152k-word vocabulary over every prompt token would dominate time and memory)."""
    import torch

    labels = batch["labels"]
    answer = (labels != IGNORE).any(0).nonzero()
    keep = labels.shape[1] - int(answer[0]) + 1 if len(answer) else 1
    logits = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        logits_to_keep=keep,
    ).logits
    targets = labels[:, labels.shape[1] - keep + 1 :]
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].float().reshape(-1, logits.shape[-1]),
        targets.reshape(-1),
        ignore_index=IGNORE,
    )


def _schedule(steps: int, warmup: float) -> Any:
    warm = max(1, int(steps * warmup))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.05, (steps - step) / max(1, steps - warm))

    return factor


def train(
    model: Any,
    tokenizer: Any,
    samples: Sequence[Sample],
    *,
    steps: int = STEPS,
    batch_size: int = 4,
    lr: float = 2e-4,
    warmup: float = 0.1,
    max_grad_norm: float = 1.0,
    max_length: int = 1024,
    seed: int = 0,
    log_every: int = 10,
) -> list[float]:
    """Train the model's trainable (LoRA) parameters on the samples; returns the loss per step."""
    import torch

    end = end_of_turn(tokenizer)
    encoded = [e for s in samples if (e := encode(tokenizer, s, max_length, end)) is not None]
    if not encoded:
        raise SystemExit(f"no training sample fits --max-length {max_length}")
    if len(encoded) < len(samples):
        print(f"skipped {len(samples) - len(encoded)} samples over {max_length} tokens")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else end[0]
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(steps, warmup))
    device = next(model.parameters()).device
    rng = random.Random(seed)
    torch.manual_seed(seed)
    order: list[int] = []
    losses: list[float] = []
    model.train()
    started = time.monotonic()
    for step in range(steps):
        if len(order) < batch_size:
            fresh = list(range(len(encoded)))
            rng.shuffle(fresh)
            order += fresh
        batch = [encoded[i] for i in order[:batch_size]]
        del order[:batch_size]
        tensors = {k: v.to(device) for k, v in collate(batch, pad).items()}
        loss = answer_loss(model, tensors)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        if log_every and ((step + 1) % log_every == 0 or step + 1 == steps):
            recent = losses[-log_every:]
            print(
                f"step {step + 1}/{steps}  loss {sum(recent) / len(recent):.4f}  "
                f"{time.monotonic() - started:.0f}s",
                flush=True,
            )
    model.eval()
    return losses
