"""Contrastive fine-tuning of the encoder on a repository's own history (seed 004 §3.2).

Positives are the before/after versions of one function or method changed by a commit; negatives
are other functions of the same file that neither call nor are called by it, plus, when asked,
the retriever's confusers. A plain PyTorch loop (no HF ``Trainer``) minimises NT-Xent at
temperature 0.07 with AdamW (lr 2e-5, linear warmup over 10% then linear decay), micro-batches of
8 with gradient accumulation 4, and a global grad-norm clip of 1.0 before every optimizer step.
The result is a local model directory the embedder loads through ``CODERAG_EMBED_MODEL``.

    coderag finetune-embedder --repo-path PATH [--base-model DIR] [--out DIR] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from coderag.settings import get_settings
from coderag_embedder.encoder import default_model_dir
from coderag_training.embedder.evaluation import evaluate, metrics_table
from coderag_training.embedder.pairs import mine_pairs, retriever_hard_negatives, split_by_symbol
from coderag_training.embedder.training import SUMMARY_FILE, train


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="coderag finetune-embedder",
        description="Contrastively fine-tune the encoder on a repository's git history.",
    )
    p.add_argument("--repo-path", required=True, type=Path, help="git work tree to mine")
    p.add_argument("--base-model", type=Path, help="local encoder directory (default MiniLM)")
    p.add_argument("--out", type=Path, help="output directory (default DATA_DIR/models/...)")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--accumulation", type=int, default=4)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--warmup", type=float, default=0.1)
    p.add_argument("--temperature", type=float, default=0.07)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--negatives-per-pair", type=int, default=2)
    p.add_argument("--pooling", choices=("mean", "cls"), default="mean")
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--max-commits", type=int, default=1000)
    p.add_argument("--rev", default="HEAD")
    p.add_argument("--held-out", type=float, default=0.2, help="share of functions held out")
    p.add_argument(
        "--hard-negatives-repo",
        help="indexed repository name whose retriever supplies hard negatives",
    )
    p.add_argument("--hard-k", type=int, default=5)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=50)
    return p


def main(argv: list[str] | None = None) -> int:
    """CLI: mine pairs, fine-tune, print held-out metrics before and after; exit status."""
    args = _parser().parse_args(argv)

    base = args.base_model or default_model_dir()
    repo_path = args.repo_path.resolve()
    out = args.out or get_settings().data_dir / "models" / f"{repo_path.name}-finetuned"
    hard = (
        retriever_hard_negatives(args.hard_negatives_repo, args.hard_k)
        if args.hard_negatives_repo
        else None
    )
    pairs = mine_pairs(repo_path, args.max_commits, rev=args.rev, hard_negatives=hard)
    if not pairs:
        print(f"no changed functions in the history of {repo_path}", file=sys.stderr)
        return 1
    train_pairs, held = split_by_symbol(pairs, args.held_out, args.seed)
    if not held:
        held = train_pairs  # too few functions to hold any out: report on the training pairs
    print(
        f"{len(pairs)} pairs of {len({p.key for p in pairs})} functions; "
        f"train {len(train_pairs)}, evaluate {len(held)}",
        flush=True,
    )
    kw = {"pooling": args.pooling, "max_length": args.max_length, "device": args.device}
    before = evaluate(base, held, **kw)
    summary = train(
        base,
        train_pairs,
        out,
        steps=args.steps,
        batch_size=args.batch_size,
        accumulation=args.accumulation,
        lr=args.lr,
        warmup=args.warmup,
        temperature=args.temperature,
        max_grad_norm=args.max_grad_norm,
        negatives_per_pair=args.negatives_per_pair,
        seed=args.seed,
        log_every=args.log_every,
        **kw,
    )
    after = evaluate(out, held, **kw)
    summary["evaluation"] = {"held_out_pairs": len(held), "before": before, "after": after}
    (Path(out) / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    print(metrics_table(before, after))
    print(f"saved to {out}; use it with CODERAG_EMBED_MODEL={out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
