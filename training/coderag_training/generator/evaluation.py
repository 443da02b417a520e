"""Held-out evaluation of the generator: which samples to answer, greedy answers to them, and the
before/after compliance table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from coderag_generator.chat_tokens import prompt_ids, stop_ids
from coderag_generator.samples import Sample
from coderag_training.generator.traps import KINDS


def generate_answers(
    model: Any,
    tokenizer: Any,
    samples: Sequence[Sample],
    *,
    max_new_tokens: int = 96,
    batch_size: int = 8,
) -> list[str]:
    """Greedy answers to the samples' prompts (left-padded batches)."""
    import torch

    stops = stop_ids(tokenizer, model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
    device = next(model.parameters()).device
    model.eval()
    answers: list[str] = []
    for start in range(0, len(samples), batch_size):
        prompts = [prompt_ids(tokenizer, s.messages()) for s in samples[start : start + batch_size]]
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        with torch.no_grad():
            out = model.generate(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                eos_token_id=stops,
                pad_token_id=pad,
            )
        for row in out[:, width:]:
            answers.append(tokenizer.decode(row, skip_special_tokens=True).strip())
    return answers


def pick_eval(samples: Sequence[Sample], limit: int) -> list[Sample]:
    """Up to ``limit`` samples (0: all), taken round-robin over type and language."""
    if limit <= 0 or limit >= len(samples):
        return list(samples)
    groups: dict[tuple[str, str], list[Sample]] = {}
    for s in samples:
        groups.setdefault((s.kind, s.lang), []).append(s)
    out: list[Sample] = []
    while len(out) < limit:
        for key in sorted(groups):
            if groups[key] and len(out) < limit:
                out.append(groups[key].pop(0))
    return out


def compliance_table(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Markdown table of the compliant share per type, before and after."""
    rows = ["| type | n | before | after |", "| --- | ---: | ---: | ---: |"]
    for kind in (*KINDS, "all"):
        if kind in after:
            b, a = before.get(kind, {}), after[kind]
            rows.append(
                f"| {kind} | {a['n']} | {b.get('share', 0.0):.0%} ({b.get('compliant', 0)}) "
                f"| {a['share']:.0%} ({a['compliant']}) |"
            )
    return "\n".join(rows)
