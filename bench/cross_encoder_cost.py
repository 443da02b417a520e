"""What a cross-encoder of our own would cost on this machine: training steps and reranking, timed
with the packaged encoders as the starting point (issue 21's lever for rank 1).

    python -m bench.cross_encoder_cost [--steps 3] [--batch 16] [--train-tokens 192]

A cross-encoder reads a question and a unit's code together and scores the pair; initialised
from a packaged encoder (MiniLM-L6, English; multilingual-e5-small for Chinese too) with a fresh
scoring head. Timed here: one AdamW step of ``--batch`` (question, code) pairs at
``--train-tokens`` tokens, and scoring the top 20 hits of one question at 256 tokens, fp32 and
int8 (dynamic quantization, as the embedder runs on CPU). The pairs are real units of a pinned
corpus (chi) with a test-split question; only time is measured, so nothing is learned from them.
Run it on a quiet machine: it prints the load average before it starts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from bench.fetch import corpus_root  # noqa: E402
from coderag_embedder.encoder import converted_e5, default_model_dir  # noqa: E402

QUESTION = "How does the router tell apart a path that exists but not for the request's method?"
"""The question every pair carries (chi's first test question)."""

RERANK_K = 20
"""Hits a reranker would score per question."""


def _texts(n: int) -> list[str]:
    """The first ``n`` Go files' openings of chi, as stand-ins for units."""
    files = sorted(corpus_root("chi").rglob("*.go"))
    return [p.read_text("utf-8", errors="replace")[:4000] for p in files[:n]]


def _model(path: Path):  # type: ignore[no-untyped-def]
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=1, local_files_only=True
    )
    return tok, model


def main() -> int:
    """Time training steps and reranking for each packaged encoder."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--train-tokens", type=int, default=192)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(2)
    print(f"load average before: {os.getloadavg()[0]:.2f}; torch threads 2")
    texts = _texts(max(args.batch, RERANK_K))
    print(
        "| encoder | train step (batch, tokens) s | steps/hour | rerank top 20 fp32 s | "
        "rerank top 20 int8 s |"
    )
    print("| --- | --- | --- | --- | --- |")
    for label, path in (("MiniLM-L6", default_model_dir()), ("e5-small", converted_e5())):
        tok, model = _model(path)
        opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
        batch = tok(
            [QUESTION] * args.batch,
            texts[: args.batch],
            truncation="only_second",
            max_length=args.train_tokens,
            padding="max_length",
            return_tensors="pt",
        )
        steps = []
        model.train()
        for _ in range(args.steps + 1):
            start = time.perf_counter()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(**batch).logits.squeeze(-1), torch.ones(args.batch)
            )
            loss.backward()
            opt.step()
            opt.zero_grad()
            steps.append(time.perf_counter() - start)
        step = statistics.median(steps[1:])  # the first step allocates
        model.eval()
        pairs = tok(
            [QUESTION] * RERANK_K,
            texts[:RERANK_K],
            truncation="only_second",
            max_length=256,
            padding="max_length",
            return_tensors="pt",
        )
        rerank = {}
        quantized = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, torch.qint8)
        for name, m in (("fp32", model), ("int8", quantized)):
            with torch.no_grad():
                m(**pairs)
                times = []
                for _ in range(3):
                    start = time.perf_counter()
                    m(**pairs)
                    times.append(time.perf_counter() - start)
            rerank[name] = statistics.median(times)
        print(
            f"| {label} | {step:.2f} ({args.batch}, {args.train_tokens}) | {3600 / step:.0f} | "
            f"{rerank['fp32']:.2f} | {rerank['int8']:.2f} |"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
