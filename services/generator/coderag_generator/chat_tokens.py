"""Chats as token ids: prompts built exactly as the hf backend builds them, the end of an
assistant turn, and training samples with the loss on the answer only, left-padded into batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coderag_generator.samples import Sample

if TYPE_CHECKING:
    import torch

IGNORE = -100
"""Label of tokens that carry no loss (the prompt, padding)."""


@dataclass
class Encoded:
    """A tokenised chat: ids, and labels that are ``IGNORE`` outside the answer."""

    ids: list[int]
    labels: list[int]


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Prompt ids of chat messages, as the hf backend and training both build them (control
    tokens inside the messages stay text)."""
    out = tokenizer.apply_chat_template(
        messages,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        sanitize_control_tokens=True,
    )
    return list(out["input_ids"])


def end_of_turn(tokenizer: Any) -> list[int]:
    """Ids the chat template puts after an assistant answer (``<|im_end|>`` for ChatML)."""
    probe = "PROBE-ANSWER"
    chat = [{"role": "user", "content": "q"}]
    prefix = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(
        [*chat, {"role": "assistant", "content": probe}], tokenize=False
    )
    if full.startswith(prefix) and full[len(prefix) :].startswith(probe):
        tail = full[len(prefix) + len(probe) :].rstrip()
        if tail:
            return list(tokenizer(tail, add_special_tokens=False)["input_ids"])
    return [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []


def stop_ids(tokenizer: Any, model: Any) -> list[int]:
    """Token ids that end generation: the end of turn and the model's eos ids."""
    ids = set(end_of_turn(tokenizer)[:1])
    eos = model.generation_config.eos_token_id
    ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return sorted(ids)


def encode(tokenizer: Any, sample: Sample, max_length: int, end: list[int]) -> Encoded | None:
    """Prompt and answer ids with the loss on the answer and its end of turn; None if too long."""
    prompt = prompt_ids(tokenizer, sample.messages())
    answer = tokenizer(sample.target, add_special_tokens=False, split_special_tokens=True)
    target = list(answer["input_ids"]) + end
    if len(prompt) + len(target) > max_length:
        return None
    return Encoded(prompt + target, [IGNORE] * len(prompt) + target)


def collate(batch: Sequence[Encoded], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-padded tensors (every answer ends at the last column): input ids, attention mask,
    position ids, labels."""
    import torch

    width = max(len(e.ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, e in enumerate(batch):
        ids[i, width - len(e.ids) :] = torch.tensor(e.ids)
        labels[i, width - len(e.labels) :] = torch.tensor(e.labels)
        mask[i, width - len(e.ids) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels}
