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
import sys
import time
from pathlib import Path
from typing import Any

from coderag.errors import NotFound
from coderag.settings import get_settings
from coderag_generator.samples import Sample
from coderag_training.generator.compliance import compliance
from coderag_training.generator.evaluation import compliance_table, generate_answers, pick_eval
from coderag_training.generator.gguf_tools import (
    TOOLS_ENV,
    ConversionError,
    convert_adapter,
    llama_cpp_answers,
)
from coderag_training.generator.training import (
    LORA_ALPHA,
    LORA_DROPOUT,
    LORA_R,
    LORA_TARGETS,
    STEPS,
    load_base,
    lora_config,
    pick_device,
    train,
)
from coderag_training.generator.traps import build_traps

SUMMARY_FILE = "coderag-finetune.json"
"""Parameters, loss curve and compliance, written into the adapter directory."""

GGUF_FILE = "adapter.gguf"
"""The GGUF LoRA for llama.cpp, written into the adapter directory."""


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
