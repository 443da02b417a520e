"""Contrastive fine-tuning of the default encoder on a real history, held-out retrieval measured.

Three successive releases of click (``bench/finetune.json``, pinned by sha256, fetched with
``bench/fetch.py``) are committed in order into a temporary git repository. Pairs are mined from
that history, split by function into train and held-out (every version of a function on one
side), the packaged all-MiniLM-L6-v2 is fine-tuned on the train pairs with the seed's parameters
(NT-Xent T=0.07, AdamW 2e-5, warmup 0.1, batch 8 x accumulation 4, clip 1.0) for a small CPU
step budget (the default of ``coderag finetune-embedder`` is 2000 steps), and each held-out
before-version must find its after-version among all held-out after-versions and negatives.

    python -m bench.finetune_embedder [--steps 10] [--held-out 0.2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import git

HERE = Path(__file__).resolve().parent

from bench.fetch import fetch  # noqa: E402

PINS = HERE / "finetune.json"
"""The pinned releases, oldest first."""

DEFAULT_STEPS = 10
"""Optimizer steps that fit in about ten minutes on two CPU cores (each step is 32 pairs)."""


def build_history(entries: list[dict], work: Path) -> Path:
    """A git repository with one commit per release, in the order given."""
    repo = git.Repo.init(work)
    for entry in entries:
        src = fetch(entry)
        for child in work.iterdir():
            if child.name != ".git":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        shutil.copytree(src, work, dirs_exist_ok=True)
        repo.git.add(A=True)
        repo.index.commit(
            f"{entry['package']} {entry['version']}",
            author=git.Actor("Bench", "bench@example.invalid"),
        )
    return work


def main() -> int:
    """Mine, split, fine-tune and print held-out metrics before and after as markdown."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--accumulation", type=int, default=4)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--negatives-per-pair", type=int, default=2)
    ap.add_argument("--held-out", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--keep", type=Path, help="keep the fine-tuned model in this directory")
    args = ap.parse_args()

    import torch

    from coderag_embedder.encoder import default_model_dir
    from coderag_training.embedder.evaluation import evaluate, metrics_table
    from coderag_training.embedder.pairs import mine_pairs, split_by_symbol
    from coderag_training.embedder.training import train

    entries = json.loads(PINS.read_text())
    base = default_model_dir()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="coderag-finetune-") as tmp:
        repo = build_history(entries, Path(tmp) / entries[0]["package"])
        pairs = mine_pairs(repo)
        train_pairs, held = split_by_symbol(pairs, args.held_out, args.seed)
        kw = {"max_length": args.max_length, "device": args.device}
        t0 = time.monotonic()
        before = evaluate(base, held, **kw)
        eval_s = time.monotonic() - t0
        out = args.keep or Path(tmp) / "tuned"
        summary = train(
            base,
            train_pairs,
            out,
            steps=args.steps,
            batch_size=args.batch_size,
            accumulation=args.accumulation,
            negatives_per_pair=args.negatives_per_pair,
            seed=args.seed,
            log_every=1,
            **kw,
        )
        after = evaluate(out, held, **kw)
    total_s = time.monotonic() - started
    losses = summary["loss_curve"]
    p = summary["params"]
    versions = " → ".join(e["version"] for e in entries)
    print(f"### Contrastive fine-tuning of all-MiniLM-L6-v2 on {entries[0]['package']} history\n")
    print(
        f"History {versions}: {len(pairs)} before/after pairs of "
        f"{len({x.key for x in pairs})} functions; train {len(train_pairs)} pairs, held out "
        f"{len(held)} pairs ({len({x.key for x in held})} functions, split by function), "
        f"{before.get('candidates', 0)} candidates per held-out query.\n"
    )
    print(
        f"Training: {p['steps']} optimizer steps (CPU budget; the CLI default is 2000) × "
        f"batch {p['batch_size']} × accumulation {p['accumulation']} = "
        f"{p['steps'] * p['effective_batch']} pair presentations "
        f"({p['steps'] * p['effective_batch'] / max(1, len(train_pairs)):.1f} epochs), "
        f"NT-Xent T={p['temperature']}, AdamW lr {p['lr']}, warmup {p['warmup']}, clip "
        f"{p['max_grad_norm']} ({summary['clipped_steps']}/{p['steps']} steps clipped), "
        f"max length {p['max_length']}, {p['negatives_per_pair']} explicit negatives per pair; "
        f"{summary['seconds']:.0f} s on {summary['device']} with "
        f"{torch.get_num_threads()} threads. Loss {losses[0]:.4f} (step 1) → "
        f"{losses[-1]:.4f} (step {len(losses)}). One evaluation pass: {eval_s:.0f} s; "
        f"whole run {total_s:.0f} s.\n"
    )
    print("Held-out retrieval (before-version → its after-version):\n")
    print(metrics_table(before, after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
