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
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coderag_embedder.encoder import Encoder, default_model_dir, unit_text

HardNegatives = Callable[[str], list[str]]
"""Given an anchor's text, texts that look close to it but are other code (the confusers)."""

FUNCTION_KINDS = frozenset({"function", "method"})
"""Unit kinds that form positive pairs."""

SUMMARY_FILE = "coderag-finetune.json"
"""Name of the parameters / loss-curve record written next to the fine-tuned weights."""

MAX_BLOB_BYTES = 1_000_000
"""Larger file versions are skipped while mining (generated or vendored code)."""

HARD_QUERY_CHARS = 1000
"""How much of an anchor's text the retriever sees when asked for confusers."""


@dataclass(frozen=True)
class Pair:
    """A changed function: its text before and after one commit, and texts that must not match."""

    file: str
    symbol: str
    commit: str
    anchor: str
    positive: str
    negatives: tuple[str, ...] = ()
    negative_symbols: tuple[str, ...] = ()
    hard_negatives: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Identity of the function across commits: file and qualified symbol."""
        return f"{self.file}::{self.symbol}"

    def all_negatives(self) -> tuple[str, ...]:
        """Same-file negatives followed by hard negatives."""
        return self.negatives + self.hard_negatives


@dataclass
class _Version:
    """The function units of one version of a file, with their call facts."""

    units: dict[str, Any] = field(default_factory=dict)
    callees: dict[str, set[str]] = field(default_factory=dict)
    duplicated: set[str] = field(default_factory=set)


def short_name(symbol: str) -> str:
    """The bare name of a qualified symbol (``Store.save`` -> ``save``)."""
    return symbol.rsplit(".", 1)[-1]


def head_of(text: str) -> str:
    """First line of a ``unit_text`` (language, kind, symbol): the identity used for masking."""
    return text.split("\n", 1)[0]


def _version(repo: str, path: str, language: str, source: str) -> _Version:
    """Parse one version of a file into its function units and who-calls-what."""
    from coderag_parser.units import parse_source

    parsed = parse_source(repo, path, language, source)
    out = _Version()
    by_id: dict[str, str] = {}
    for unit in parsed.units:
        if unit.kind not in FUNCTION_KINDS or "[part " in unit.symbol:
            continue
        if unit.symbol in out.units:
            out.duplicated.add(unit.symbol)  # overloads, property setters: ambiguous
        out.units[unit.symbol] = unit
        out.callees.setdefault(unit.symbol, set())
        by_id[unit.id] = unit.symbol
    for call in parsed.calls:
        caller = by_id.get(call["caller"])
        if caller is not None:
            out.callees[caller].add(call["callee"])
    for symbol in out.duplicated:
        out.units.pop(symbol, None)
    return out


def _related(a: str, b: str, *versions: _Version) -> bool:
    """Whether ``a`` calls ``b`` or ``b`` calls ``a`` in any of the versions (by bare name)."""
    return any(
        short_name(b) in v.callees.get(a, set()) or short_name(a) in v.callees.get(b, set())
        for v in versions
    )


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _blob_text(blob: Any) -> str | None:
    if blob is None or blob.size > MAX_BLOB_BYTES:
        return None
    data = blob.data_stream.read()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace")


def _stable_rng(*parts: str) -> random.Random:
    return random.Random(hashlib.sha1("\0".join(parts).encode()).hexdigest())


def mine_pairs(
    repo_path: str | Path,
    max_commits: int | None = 1000,
    *,
    rev: str = "HEAD",
    max_negatives: int = 4,
    hard_negatives: HardNegatives | None = None,
    max_hard_negatives: int = 4,
) -> list[Pair]:
    """Before/after pairs of the functions changed in the last ``max_commits`` commits of ``rev``
    (first-parent diffs), with same-file negatives that have no call relation to the pair."""
    import git

    from coderag_parser.languages import has_grammar, language_of

    repo = git.Repo(str(repo_path))
    name = Path(repo_path).resolve().name
    pairs: list[Pair] = []
    commits = list(repo.iter_commits(rev, max_count=max_commits))
    for commit in reversed(commits):  # oldest first: a stable, chronological order
        if not commit.parents:
            continue
        for diff in commit.parents[0].diff(commit):
            if diff.a_blob is None or diff.b_blob is None or diff.a_blob == diff.b_blob:
                continue  # added, deleted, or only a mode change
            path = diff.b_path or diff.a_path
            language = language_of(path)
            if language is None or not has_grammar(language):
                continue
            before_src, after_src = _blob_text(diff.a_blob), _blob_text(diff.b_blob)
            if before_src is None or after_src is None:
                continue
            before = _version(name, diff.a_path or path, language, before_src)
            after = _version(name, path, language, after_src)
            for symbol in sorted(before.units.keys() & after.units.keys()):
                old, new = before.units[symbol], after.units[symbol]
                if _normalised(old.text) == _normalised(new.text):
                    continue
                candidates = [
                    other
                    for other in sorted(after.units)
                    if other != symbol and not _related(symbol, other, before, after)
                ]
                picked = sorted(
                    _stable_rng(commit.hexsha, path, symbol).sample(
                        candidates, min(max_negatives, len(candidates))
                    )
                )
                anchor, positive = unit_text(old), unit_text(new)
                hard: tuple[str, ...] = ()
                if hard_negatives is not None:
                    own = head_of(anchor)
                    seen: list[str] = []
                    for text in hard_negatives(anchor):
                        if head_of(text) != own and text not in (anchor, positive, *seen):
                            seen.append(text)
                    hard = tuple(seen[:max_hard_negatives])
                pairs.append(
                    Pair(
                        file=path,
                        symbol=symbol,
                        commit=commit.hexsha,
                        anchor=anchor,
                        positive=positive,
                        negatives=tuple(unit_text(after.units[s]) for s in picked),
                        negative_symbols=tuple(picked),
                        hard_negatives=hard,
                    )
                )
    return pairs


def retriever_hard_negatives(repo_name: str, k: int = 5) -> HardNegatives:
    """Confusers from the retriever: the top-``k`` units ``rank`` returns for an anchor's text
    over the indexed repository ``repo_name``, other than units of the anchor's own symbol."""
    from coderag.settings import get_settings
    from coderag_retriever.search import rank

    def confusers(text: str) -> list[str]:
        own = head_of(text)
        ranked = rank(repo_name, text[:HARD_QUERY_CHARS], k + 3, get_settings())
        out = [unit_text(r.unit) for r in ranked]
        return [t for t in out if head_of(t) != own][:k]

    return confusers


def split_by_symbol(
    pairs: Sequence[Pair], held_out: float = 0.2, seed: int = 0
) -> tuple[list[Pair], list[Pair]]:
    """Train and held-out pairs, split by function (every version of a function on one side);
    train negatives that are held-out functions are dropped, so no held-out text is trained on."""
    keys = sorted({p.key for p in pairs})
    random.Random(seed).shuffle(keys)
    n_held = min(max(1, round(len(keys) * held_out)), len(keys) - 1) if held_out > 0 else 0
    held = set(keys[:n_held])
    held_heads = {head_of(p.anchor) for p in pairs if p.key in held}
    train_pairs: list[Pair] = []
    for p in pairs:
        if p.key in held:
            continue
        kept = [
            (t, s)
            for t, s in zip(p.negatives, p.negative_symbols, strict=True)
            if f"{p.file}::{s}" not in held
        ]
        train_pairs.append(
            Pair(
                p.file,
                p.symbol,
                p.commit,
                p.anchor,
                p.positive,
                tuple(t for t, _ in kept),
                tuple(s for _, s in kept),
                tuple(t for t in p.hard_negatives if head_of(t) not in held_heads),
            )
        )
    return train_pairs, [p for p in pairs if p.key in held]


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


def _pool(hidden: Any, mask: Any, pooling: str) -> Any:
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


def _lr_factor(step: int, total: int, warmup_steps: int) -> float:
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
        optimizer, lambda s: _lr_factor(s, steps, warmup_steps)
    )
    params = [p for group in optimizer.param_groups for p in group["params"]]

    def embed(texts: list[str]) -> Any:
        batch = tokenizer(
            texts, padding=True, truncation=True, max_length=length, return_tensors="pt"
        ).to(dev)
        hidden = model(**batch).last_hidden_state
        return _pool(hidden, batch["attention_mask"], pooling)

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
                pool = p.all_negatives()
                negatives += rng.sample(pool, min(negatives_per_pair, len(pool)))
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


def evaluate(
    model_dir: str | Path,
    pairs: Sequence[Pair],
    *,
    pooling: str = "mean",
    max_length: int = 256,
    device: str = "auto",
    batch_size: int = 32,
) -> dict[str, float]:
    """Retrieval of each after-version from its before-version among all after-versions and
    negatives, through the embedder's own ``Encoder``: recall@1, recall@5, MRR, mean cosine of
    positives and of explicit negatives."""
    import numpy as np

    if not pairs:
        return {"pairs": 0}
    encoder = Encoder(Path(model_dir), pooling, max_length, device, batch_size)
    pool = list(
        dict.fromkeys([p.positive for p in pairs] + [t for p in pairs for t in p.all_negatives()])
    )
    index = {t: i for i, t in enumerate(pool)}
    cand = encoder.encode(pool)
    anchors = encoder.encode([p.anchor for p in pairs])
    heads = [head_of(t) for t in pool]
    ranks, pos_cos, neg_cos = [], [], []
    for a, p in zip(anchors, pairs, strict=True):
        sims = cand @ a
        target = index[p.positive]
        own = head_of(p.anchor)
        others = [
            i for i, h in enumerate(heads) if i != target and h != own
        ]  # other versions of the same function are not wrong answers
        ranks.append(1 + int(np.sum(sims[others] > sims[target])))
        pos_cos.append(float(sims[target]))
        neg_cos += [float(sims[index[t]]) for t in p.all_negatives()]
    r = np.asarray(ranks)
    mean_pos = float(np.mean(pos_cos))
    mean_neg = float(np.mean(neg_cos)) if neg_cos else float("nan")
    return {
        "pairs": len(pairs),
        "candidates": len(pool),
        "recall@1": float(np.mean(r == 1)),
        "recall@5": float(np.mean(r <= 5)),
        "mrr": float(np.mean(1.0 / r)),
        "cos_pos": mean_pos,
        "cos_neg": mean_neg,
        "cos_gap": mean_pos - mean_neg,
    }


def metrics_table(before: dict[str, float], after: dict[str, float]) -> str:
    """A markdown table of before/after metrics."""
    rows = ["| metric | before | after |", "|---|---:|---:|"]
    for key in ("recall@1", "recall@5", "mrr", "cos_pos", "cos_neg", "cos_gap"):
        if key in before and key in after:
            rows.append(f"| {key} | {before[key]:.4f} | {after[key]:.4f} |")
    return "\n".join(rows)


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
    from coderag.settings import get_settings

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
