"""Train the code cross-encoder (issue 31): the packaged all-MiniLM-L6-v2 with a scoring head,
fine-tuned listwise on candidate lists from ``bench/rerank_data.py``, and exported small.

A group is a question, its gold unit and ``GROUP - 1`` wrong units: random units of the same
code base early, the ranker's own best wrong hits later (a curriculum from easy to hard). The
loss is the softmax cross-entropy of the gold unit in its group (listwise), which, unlike the
binary loss of issue 21's run, cannot be lowered by predicting the base rate.

The model is the packaged MiniLM's first ``LAYERS`` layers reading ``MAX_TOKENS`` tokens: on two
CPU cores a pair costs about a third of the whole encoder at 256 tokens, in training and when
serving. The word, position and type embeddings stay frozen at the packaged model's: the export
then holds only the transformer layers and the head (about 7M parameters, fp16), and
:mod:`coderag_embedder.rerank` rebuilds the model from the packaged weights plus these.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coderag.embedding import reader_text
from coderag_embedder import rerank as serving
from coderag_embedder.rerank import Reader

GROUP = 6
"""Units per listwise group: the gold one and five wrong ones."""

MAX_TOKENS = 160
"""Tokens of question plus unit the model reads (the question cut to 64 of them)."""

LAYERS = 4
"""Transformer layers kept of the packaged MiniLM's six."""

FROZEN = ("embeddings.",)
"""Parameter-name prefixes (after the base model's prefix) that are not trained or exported."""


def unit_text(c: dict[str, Any]) -> str:
    """What the cross-encoder reads of a candidate record (the serving format)."""
    return reader_text(c["file"], c["kind"], c["symbol"], c.get("doc") or "", c.get("text") or "")


@dataclass
class Question:
    """One training or evaluation question with its candidate lists."""

    id: str
    corpus: str
    split: str
    lang: str
    type: str
    query: str
    reader_query: str
    candidates: list[dict[str, Any]]
    randoms: list[dict[str, Any]]
    golds: list[dict[str, Any]]
    code_language: str = ""
    style: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def load(paths: Iterable[Path]) -> list[Question]:
    """Questions from candidate-list files."""
    out = []
    for path in paths:
        for line in path.read_text("utf-8").splitlines():
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:  # a file still being written ends mid-line
                continue
            out.append(
                Question(
                    id=r["id"],
                    corpus=r["corpus"],
                    split=r["split"],
                    lang=r["lang"],
                    type=r["type"],
                    query=r["query"],
                    reader_query=r.get("reader_query") or r["query"],
                    candidates=r["candidates"],
                    randoms=r.get("randoms", []),
                    golds=r.get("golds", []),
                    code_language=r.get("code_language", ""),
                    style=r.get("style", ""),
                )
            )
    return out


Candidates = list[dict[str, Any]]
"""Candidate records of one question (``bench/rerank_data.py``'s format)."""


def pools(q: Question) -> tuple[Candidates, Candidates, Candidates]:
    """A question's gold units (its labelled hits, else the gold records), the ranker's best
    wrong hits (of its first 15) and its random wrong units: what every trainer draws from."""
    golds = [c for c in q.candidates if c.get("label")] or [{**c, "label": 1} for c in q.golds]
    hard = [c for c in q.candidates[:15] if not c.get("label")]
    easy = [c for c in q.randoms if not c.get("label")]
    return golds, hard, easy


def group(
    q: Question, hard_share: float, rng: random.Random, size: int = GROUP
) -> list[dict[str, Any]] | None:
    """The gold unit first, then ``size - 1`` wrong ones, ``hard_share`` of them the ranker's
    best wrong hits and the rest random units; None when the question has no gold unit."""
    golds, hard, easy = pools(q)
    if not golds:
        return None
    want_hard = min(len(hard), round(hard_share * (size - 1)))
    negatives = rng.sample(hard, want_hard)
    rest = [c for c in easy if c not in negatives]
    negatives += rng.sample(rest, min(len(rest), size - 1 - len(negatives)))
    if len(negatives) < size - 1:
        more = [c for c in q.candidates if not c.get("label") and c not in negatives]
        negatives += more[: size - 1 - len(negatives)]
    if len(negatives) < 1:
        return None
    return [rng.choice(golds), *negatives]


def fresh() -> Reader:
    """The packaged MiniLM with a new one-logit head, its embeddings frozen."""
    reader = serving.fresh(MAX_TOKENS, LAYERS)
    for name, p in reader.model.named_parameters():
        if _frozen(name):
            p.requires_grad_(False)
    return reader


def _frozen(name: str) -> bool:
    tail = name.split(".", 1)[1] if name.startswith("bert.") else name
    return tail.startswith(FROZEN)


@dataclass
class Run:
    """A training run's settings."""

    steps: int = 1000
    lr: float = 5e-5
    groups_per_step: int = 2
    warmup: float = 0.05
    hard_start: float = 0.2
    hard_end: float = 0.85
    eval_every: int = 200
    log_every: int = 50
    head_lr: float = 1e-3
    seed: int = 0
    threads: int = 2
    device: str = "cpu"
    """Where the model trains: ``cpu`` or ``cuda`` (a lent GPU runs the same recipe)."""


@dataclass
class Log:
    """What a run printed: loss per step window and the tuning metric at each evaluation."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, **row: Any) -> None:
        """Record and print one row."""
        self.rows.append(row)
        print(json.dumps(row), flush=True)


def train(
    reader: Reader,
    questions: Sequence[Question],
    run: Run,
    evaluate: Callable[[Reader], dict[str, float]] | None = None,
    weights: Sequence[float] | None = None,
    log: Log | None = None,
) -> Log:
    """Listwise fine-tuning; ``evaluate`` runs every ``run.eval_every`` steps and at the end,
    and the weights of its best ``r1`` are restored when the run ends (stop on tune)."""
    import torch

    torch.manual_seed(run.seed)
    torch.set_num_threads(run.threads)
    reader.model.to(run.device)
    rng = random.Random(run.seed)
    log = log or Log()
    params = [p for p in reader.model.parameters() if p.requires_grad]
    head = [
        p for n, p in reader.model.named_parameters() if p.requires_grad and n.startswith("head.")
    ]
    body = [
        p
        for n, p in reader.model.named_parameters()
        if p.requires_grad and not n.startswith("head.")
    ]
    # the new head starts at ~0: at the encoder's rate Adam would take thousands of steps to grow it
    opt = torch.optim.AdamW(
        [{"params": body, "lr": run.lr}, {"params": head, "lr": run.head_lr}], weight_decay=0.01
    )
    warm = max(1, int(run.warmup * run.steps))

    def lr_at(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (run.steps - step) / max(1, run.steps - warm))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    pool = list(range(len(questions)))
    probs = None
    if weights is not None:
        total = sum(weights)
        probs = [w / total for w in weights]
    best: tuple[tuple[float, float], dict[str, Any] | None] = ((-1.0, -1.0), None)
    window: list[float] = []
    t0 = time.time()
    reader.model.train()
    for step in range(run.steps):
        share = run.hard_start + (run.hard_end - run.hard_start) * step / max(1, run.steps - 1)
        loss_sum = torch.zeros((), device=run.device)
        n = 0
        while n < run.groups_per_step:
            i = rng.choices(pool, probs)[0] if probs else rng.choice(pool)
            g = group(questions[i], share, rng)
            if g is None:
                continue
            logits = reader.logits(questions[i].reader_query, [unit_text(c) for c in g])
            loss_sum = loss_sum + torch.nn.functional.cross_entropy(
                logits[None, :], torch.zeros(1, dtype=torch.long, device=logits.device)
            )
            n += 1
        loss = loss_sum / n
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        window.append(float(loss))
        last = step + 1 == run.steps
        if (step + 1) % run.log_every == 0 or last:
            log.add(
                step=step + 1,
                loss=round(sum(window) / len(window), 4),
                chance=round(math.log(GROUP), 4),
                lr=sched.get_last_lr()[0],
                seconds=round(time.time() - t0, 1),
            )
            window = []
        if evaluate is not None and ((step + 1) % run.eval_every == 0 or last):
            reader.model.eval()
            metrics = evaluate(reader)
            reader.model.train()
            log.add(step=step + 1, **metrics)
            key = (metrics.get("n", 0), metrics["r1"])
            if key > best[0]:
                state = {k: v.detach().clone() for k, v in reader.model.state_dict().items()}
                best = (key, state)
    if best[1] is not None:
        reader.model.load_state_dict(best[1])
        log.add(restored_best_n=best[0][0], restored_best_r1=best[0][1])
    reader.model.eval()
    return log


def rerank(reader: Reader, q: Question, top: int, weight: float) -> list[dict[str, Any]]:
    """The question's candidates with the first ``top`` reordered by the cross-encoder's logit
    plus ``weight`` times the log-odds of the learned ranker's confidence."""
    head, tail = q.candidates[:top], q.candidates[top:]
    logits = reader.scores(q.reader_query, [unit_text(c) for c in head])
    combined = [
        s + weight * _log_odds(c.get("confidence")) for s, c in zip(logits, head, strict=True)
    ]
    order = sorted(range(len(head)), key=lambda i: -combined[i])
    return [head[i] for i in order] + tail


def _log_odds(p: float | None) -> float:
    if p is None:
        return 0.0
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def first_gold(ranked: Sequence[dict[str, Any]]) -> int | None:
    """1-based rank of the first gold candidate."""
    for i, c in enumerate(ranked, 1):
        if c["label"]:
            return i
    return None


def metrics(ranks: Sequence[int | None]) -> dict[str, float]:
    """R@1, R@5 and MRR@10 of first-gold ranks."""
    n = max(1, len(ranks))
    return {
        "n": len(ranks),
        "r1": round(sum(r == 1 for r in ranks) / n, 4),
        "r5": round(sum(r is not None and r <= 5 for r in ranks) / n, 4),
        "mrr": round(sum(1 / r for r in ranks if r is not None and r <= 10) / n, 4),
    }


def export(reader: Reader, out: Path, card: dict[str, Any]) -> Path:
    """Write the trained layers and head (fp16 safetensors) and the model card's facts."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {
        k: v.detach().to("cpu").half().contiguous()
        for k, v in reader.model.state_dict().items()
        if not _frozen(k) and "position_ids" not in k
    }
    path = out / "reranker.safetensors"
    save_file(state, str(path))
    (out / "reranker.json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n")
    return path
