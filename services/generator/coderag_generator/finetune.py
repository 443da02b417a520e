"""LoRA fine-tuning of the generator on trap samples of an indexed repository (G6, seed 004 §3.4).

A local causal-LM directory (Qwen2-7B-Instruct on a GPU box) gets a peft LoRA adapter (r=8,
alpha=16, dropout 0.1, on the attention q/v projections; everything else frozen), trained by a
plain PyTorch loop: AdamW, linear warmup then decay, loss on the assistant tokens only, a global
grad-norm clip of 1.0 before every step. The adapter directory loads in the ``hf`` backend through
``CODERAG_LLM_ADAPTER_PATH``; it is also converted to a GGUF LoRA for llama.cpp with the
``convert_lora_to_gguf.py`` of the llama.cpp that llama-cpp-python vendors (taken from its source
distribution on PyPI, cached once). Compliance on the held-out traps (greedy answers) is reported
before and after training.

    coderag finetune-generator --repo NAME --base-model DIR [--out DIR] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coderag_generator.gguf_tools import (
    TOOLS_ENV,
    ConversionError,
    convert_adapter,
    llama_cpp_answers,
)
from coderag_generator.traps import KINDS, Sample, build_traps, compliance

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

SUMMARY_FILE = "coderag-finetune.json"
"""Parameters, loss curve and compliance, written into the adapter directory."""

GGUF_FILE = "adapter.gguf"
"""The GGUF LoRA for llama.cpp, written into the adapter directory."""

IGNORE = -100
"""Label of tokens that carry no loss (the prompt, padding)."""


@dataclass
class Encoded:
    """A tokenised chat: ids, and labels that are ``IGNORE`` outside the answer."""

    ids: list[int]
    labels: list[int]


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


def prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Prompt ids exactly as the hf backend builds them (control tokens in text stay text)."""
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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="coderag finetune-generator",
        description="LoRA fine-tuning of the generator on trap samples of an indexed repository.",
    )
    p.add_argument("--repo", required=True, help="an indexed repository (coderag index PATH)")
    p.add_argument(
        "--base-model", type=Path, help="local causal LM directory (CODERAG_LLM_HF_MODEL)"
    )
    p.add_argument("--out", type=Path, help="adapter directory (data/models/generator-lora-REPO)")
    p.add_argument("--samples", type=int, default=500, help="trap samples to build")
    p.add_argument("--held-out", type=float, default=0.2, help="share of symbols held out")
    p.add_argument("--snippet-lines", type=int, default=24, help="lines of each unit shown")
    p.add_argument("--distractors", type=int, default=1, help="other units shown per sample")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--warmup", type=float, default=0.1, help="warmup share of the steps")
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--max-length", type=int, default=1024, help="longer samples are skipped")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-limit", type=int, default=0, help="held-out samples to answer (0: all)")
    p.add_argument("--eval-max-tokens", type=int, default=96)
    p.add_argument("--eval-batch-size", type=int, default=8)
    p.add_argument(
        "--eval-gguf",
        type=Path,
        help="answer with llama.cpp: this GGUF of the base model, then it plus the GGUF LoRA",
    )
    p.add_argument("--no-eval", action="store_true", help="skip the compliance report")
    p.add_argument("--no-gguf", action="store_true", help="skip the llama.cpp conversion")
    p.add_argument("--gguf-outtype", default="f32", choices=["f32", "f16", "bf16", "q8_0"])
    p.add_argument("--tools-dir", type=Path, help=f"conversion scripts cache (${TOOLS_ENV})")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="CODERAG_DEVICE")
    return p


def _answer(
    args: argparse.Namespace, model: Any, tokenizer: Any, samples: list[Sample], lora: Path | None
) -> tuple[list[str], float]:
    started = time.monotonic()
    if args.eval_gguf:
        answers = llama_cpp_answers(
            args.eval_gguf, samples, lora=lora, max_new_tokens=args.eval_max_tokens
        )
    else:
        answers = generate_answers(
            model,
            tokenizer,
            samples,
            max_new_tokens=args.eval_max_tokens,
            batch_size=args.eval_batch_size,
        )
    return answers, round(time.monotonic() - started, 1)


def main(argv: list[str] | None = None) -> int:
    """CLI: build traps, report compliance, train the adapter, convert it, report again."""
    args = _parser().parse_args(argv)
    from peft import get_peft_model

    from coderag.errors import NotFound
    from coderag.settings import get_settings

    settings = get_settings()
    base = args.base_model or (Path(settings.llm_hf_model) if settings.llm_hf_model else None)
    if base is None or not (base / "config.json").is_file():
        print("error: --base-model (or CODERAG_LLM_HF_MODEL) must be a local model directory")
        return 2
    if args.eval_gguf and (args.no_gguf or not args.eval_gguf.is_file()):
        print("error: --eval-gguf needs an existing GGUF file and the conversion (no --no-gguf)")
        return 2
    out = args.out or settings.data_dir / "models" / f"generator-lora-{args.repo}"
    try:
        traps = build_traps(
            args.repo,
            args.samples,
            args.seed,
            args.held_out,
            max_lines=args.snippet_lines,
            distractors=args.distractors,
        )
    except NotFound as exc:
        print(f"error: {exc}; index it first with `coderag index PATH --name {args.repo}`")
        return 2
    if not traps.train:
        print(f"error: repository {args.repo!r} has no units to build trap samples from")
        return 1
    held = pick_eval(traps.held_out or traps.train, args.eval_limit)
    evaluate = not args.no_eval
    print(
        f"{len(traps.train) + len(traps.held_out)} trap samples: train {len(traps.train)}, "
        f"held out {len(traps.held_out)} ({len(held) if evaluate else 0} evaluated"
        + (f" with llama.cpp on {args.eval_gguf.name})" if args.eval_gguf else ")"),
        flush=True,
    )
    device = pick_device(args.device or settings.device)
    model, tokenizer = load_base(base, device)
    summary: dict[str, Any] = {
        "repo": args.repo,
        "base_model": str(base),
        "device": device,
        "lora": {"r": LORA_R, "alpha": LORA_ALPHA, "dropout": LORA_DROPOUT},
        "target_modules": list(LORA_TARGETS),
        "steps": args.steps,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "samples": {
            "train": len(traps.train),
            "held_out": len(traps.held_out),
            "snippet_lines": args.snippet_lines,
            "distractors": args.distractors,
        },
        "seconds": {},
    }
    before_answers: list[str] = []
    if evaluate:
        before_answers, summary["seconds"]["eval_before"] = _answer(
            args, model, tokenizer, held, None
        )
    if device == "cuda":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    model = get_peft_model(model, lora_config())
    started = time.monotonic()
    losses = train(
        model,
        tokenizer,
        traps.train,
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup=args.warmup,
        max_grad_norm=args.max_grad_norm,
        max_length=args.max_length,
        seed=args.seed,
        log_every=args.log_every,
    )
    summary["seconds"]["train"] = round(time.monotonic() - started, 1)
    summary["losses"] = [round(x, 5) for x in losses]
    model.config.use_cache = True
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    with (out / "traps.jsonl").open("w", encoding="utf-8") as fh:
        for split, samples in (("train", traps.train), ("held_out", traps.held_out)):
            for s in samples:
                fh.write(json.dumps({"split": split, **s.to_json()}, ensure_ascii=False) + "\n")
    status = 0
    gguf: Path | None = None
    if not args.no_gguf:
        started = time.monotonic()
        try:
            gguf = convert_adapter(out, base, out / GGUF_FILE, args.tools_dir, args.gguf_outtype)
            summary["gguf"] = str(gguf)
            print(f"GGUF LoRA for llama.cpp: {gguf}", flush=True)
        except ConversionError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
        summary["seconds"]["convert"] = round(time.monotonic() - started, 1)
    if evaluate and (gguf is not None or not args.eval_gguf):
        answers, summary["seconds"]["eval_after"] = _answer(args, model, tokenizer, held, gguf)
        before = compliance(held, before_answers, traps.lines_of)
        after = compliance(held, answers, traps.lines_of)
        summary["compliance"] = {
            "evaluated": len(held),
            "engine": f"llama.cpp {args.eval_gguf}" if args.eval_gguf else f"transformers {device}",
            "before": before,
            "after": after,
        }
        summary["examples"] = [
            {"kind": s.kind, "question": s.question, "before": b, "after": a}
            for s, b, a in list(zip(held, before_answers, answers, strict=True))[:12]
        ]
        print(compliance_table(before, after))
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    tenth = max(1, len(losses) // 10)
    first, last = sum(losses[:tenth]) / tenth, sum(losses[-tenth:]) / tenth
    print(
        f"loss {first:.3f} -> {last:.3f}; adapter in {out}; use it with CODERAG_LLM_BACKEND=hf "
        f"CODERAG_LLM_HF_MODEL={base} CODERAG_LLM_ADAPTER_PATH={out}"
    )
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
