"""Held-out retrieval metrics of an encoder on mined pairs, before and after fine-tuning."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from coderag_embedder.encoder import Encoder
from coderag_training.embedder.pairs import Pair, head_of


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
