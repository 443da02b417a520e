"""A cross-encoder of our own for rank 1 (issue 21), trained on the tuning splits' questions and
the mined ones, and measured on a frozen split by reordering the learned ranker's top hits.

    # pairs: each question's gold unit and the learned ranker's best wrong ones (hard negatives)
    CODERAG_DATA_DIR=bench/.cache/data-e20 python bench/train_reranker.py collect --split tune
    CODERAG_DATA_DIR=bench/.cache/data-new python bench/train_reranker.py collect --split tune2
    CODERAG_DATA_DIR=bench/.cache/data-mined python bench/train_reranker.py collect --mined
    python bench/train_reranker.py train [--steps 900]       # bench/.cache/reranker/
    # the frozen split: the learned ranker's top 10 reordered by learned + cross-encoder
    CODERAG_DATA_DIR=bench/.cache/data-e20 python bench/train_reranker.py evaluate --split test

The model starts from the packaged all-MiniLM-L6-v2 with a fresh scoring head (English only:
Chinese questions keep the learned ranker's order). Training: binary cross-entropy on (question,
unit) pairs, AdamW 3e-5 with 10% warmup, batches of 16 at 192 tokens; the written tuning
questions' pairs are repeated ``WRITTEN_REPEAT`` times, since they are few and in users' style.
The combination rule was fixed before any evaluation: the top ``TOP`` hits are reordered by
``confidence + sigmoid(logit)``. Nothing reads the test splits but ``evaluate``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fetch import load_corpora, load_mining  # noqa: E402
from retrieval import overlaps  # noqa: E402  (its import embeds queries in this process)

from coderag.settings import get_settings  # noqa: E402
from coderag.store import get_catalog  # noqa: E402
from coderag_retriever.search import rank  # noqa: E402

PAIRS = HERE / ".cache" / "reranker-pairs"
"""Collected pairs, one file per source."""

MODEL = HERE / ".cache" / "reranker"
"""Where the trained model goes."""

NEGATIVES = 4
"""Hard negatives per question: the learned ranker's best hits that are not gold."""

CANDIDATES = 20
"""Hits the negatives are drawn from."""

TOP = 10
"""Hits the cross-encoder reorders at evaluation."""

WRITTEN_REPEAT = 3
"""Times the written tuning questions' pairs are repeated in training."""

MAX_TOKENS = 192
"""Tokens of question and unit the model reads."""


def unit_text(u) -> str:  # type: ignore[no-untyped-def]
    """What the cross-encoder reads of a unit: kind, name, doc and code."""
    return "\n".join(p for p in (f"{u.language} {u.kind} {u.symbol}", u.doc, u.text) if p)


def _overlaps(u, gold: list[dict]) -> bool:  # type: ignore[no-untyped-def]
    return any(overlaps((u.file, u.start_line, u.end_line), g) for g in gold)


def _questions(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def collect(sources: list[tuple[str, str, list[dict]]], out: Path) -> None:
    """Write (question, unit text, label) pairs for each (source, repository, questions)."""
    settings = get_settings()
    catalog = get_catalog()
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w", encoding="utf-8") as f:
        for source, repo, questions in sources:
            if catalog.get_repo(repo) is None:
                print(f"{repo} is not indexed here", file=sys.stderr)
                continue
            for q in questions:
                if q["type"] == "absent" or not q["gold"]:
                    continue
                hits = rank(repo, q["query"], CANDIDATES, settings)
                gold = [h for h in hits if _overlaps(h.unit, q["gold"])]
                wrong = [h for h in hits if not _overlaps(h.unit, q["gold"])][:NEGATIVES]
                if not gold:
                    continue
                for h, label in [(gold[0], 1), *((w, 0) for w in wrong)]:
                    row = {"source": source, "id": q["id"], "lang": q["lang"], "label": label}
                    row |= {"query": q["query"], "text": unit_text(h.unit)}
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
                    n += 1
    print(f"{out}: {n} pairs")


def train(steps: int, batch: int, seed: int = 0) -> None:
    """Fine-tune the packaged MiniLM into a cross-encoder on every collected pair."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from coderag_embedder.encoder import default_model_dir

    torch.manual_seed(seed)
    rows: list[dict] = []
    for path in sorted(PAIRS.glob("*.jsonl")):
        got = [r for r in _questions(path) if r["lang"] == "en"]
        rows += got * (WRITTEN_REPEAT if not path.name.startswith("mined") else 1)
    random.Random(seed).shuffle(rows)
    tok = AutoTokenizer.from_pretrained(default_model_dir(), local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        default_model_dir(), num_labels=1, local_files_only=True
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-5, weight_decay=0.01)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / max(1, steps - warm))
    )
    model.train()
    print(f"{len(rows)} English pairs, {steps} steps of {batch}")
    for step in range(steps):
        chunk = [rows[(step * batch + i) % len(rows)] for i in range(batch)]
        enc = tok(
            [r["query"] for r in chunk],
            [r["text"] for r in chunk],
            truncation="only_second",
            max_length=MAX_TOKENS,
            padding=True,
            return_tensors="pt",
        )
        labels = torch.tensor([float(r["label"]) for r in chunk])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            model(**enc).logits.squeeze(-1), labels
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)
    MODEL.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(MODEL)
    tok.save_pretrained(MODEL)
    print(f"wrote {MODEL}")


def evaluate(corpora: list[dict]) -> None:
    """R@1 / R@5 / MRR@10 of the learned ranker and of its top ``TOP`` reordered by
    confidence + the cross-encoder's probability, per language, on the given corpora."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(MODEL, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(MODEL, local_files_only=True)
    model = torch.ao.quantization.quantize_dynamic(model.eval(), {torch.nn.Linear}, torch.qint8)
    settings = get_settings()
    ranks: dict[str, dict[str, list[int | None]]] = {}
    for corpus in corpora:
        for q in _questions(HERE / "questions" / f"{corpus['name']}.jsonl"):
            if q["type"] == "absent":
                continue
            hits = rank(corpus["name"], q["query"], TOP, settings)
            order = list(range(len(hits)))
            if q["lang"] == "en" and hits:
                enc = tok(
                    [q["query"]] * len(hits),
                    [unit_text(h.unit) for h in hits],
                    truncation="only_second",
                    max_length=MAX_TOKENS,
                    padding=True,
                    return_tensors="pt",
                )
                with torch.no_grad():
                    p = torch.sigmoid(model(**enc).logits.squeeze(-1)).tolist()
                both = [(h.confidence or 0.0) + p[i] for i, h in enumerate(hits)]
                order = sorted(order, key=lambda i: -both[i])
            for label, seq in (("learned", list(range(len(hits)))), ("reranked", order)):
                first = next(
                    (k + 1 for k, i in enumerate(seq) if _overlaps(hits[i].unit, q["gold"])), None
                )
                for group in ("all", q["lang"]):
                    ranks.setdefault(f"{label} {group}", {}).setdefault("r", []).append(first)
    for key, got in sorted(ranks.items()):
        r = got["r"]
        n = len(r)
        r1 = sum(x == 1 for x in r) / n
        r5 = sum(x is not None and x <= 5 for x in r) / n
        mrr = sum(1 / x for x in r if x is not None) / n
        print(f"| {key} | {n} | {r1:.2f} / {r5:.2f} / {mrr:.2f} |")


def main() -> int:
    """collect | train | evaluate."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("collect", "train", "evaluate"))
    ap.add_argument("--split", action="append", default=[])
    ap.add_argument("--mined", action="store_true")
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    if args.action == "train":
        train(args.steps, args.batch)
        return 0
    corpora = [c for c in load_corpora() if c.get("split", "tune") in args.split]
    if args.action == "evaluate":
        if any(c["split"].startswith("tune") for c in corpora):
            print("(in sample: the model was trained on these questions)")
        evaluate(corpora)
        return 0
    if args.mined:
        sources = [
            (
                "mined",
                f"{e['name']}-nodoc",
                _questions(HERE / ".cache" / "mined" / f"{e['name']}.jsonl"),
            )
            for e in load_mining()
        ]
        collect(sources, PAIRS / "mined.jsonl")
    for split in args.split:
        sources = [
            (split, c["name"], _questions(HERE / "questions" / f"{c['name']}.jsonl"))
            for c in corpora
            if c["split"] == split
        ]
        collect(sources, PAIRS / f"{split}.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
