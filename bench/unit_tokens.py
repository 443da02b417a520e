"""What the encoders read of a code base: units, tokens read (each unit's encoder input cut at
the encoders' 256 tokens), tokens in the units uncut, and units under 64 tokens, from this
checkout's parser and, with ``--before``, from another checkout's (issue 42: why more units
index slower per line). Counted, not timed.

    python -m bench.unit_tokens --corpus terser --corpus node_forge [--before /tmp/before42]

The files are the fetched code base's (``bench.fetch``), ``dist/``, minified files and
``node_modules`` left out as the index leaves them; tokens are the packaged MiniLM tokenizer's.
``--before`` runs this same module under that checkout's source folders (its parser, its
``unit_text``), so both columns count the same files the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SOURCE_FOLDERS = ("shared", "services/parser", "services/embedder", ".")
"""A checkout's folders the parser and ``unit_text`` import from."""

READ = 256
"""Tokens each encoder reads of a unit (``CODERAG_EMBED_MAX_LENGTH``, e5-small's 256)."""

SMALL = 64
"""A unit under this many tokens is mostly a forward's fixed cost."""


def skipped(relative: str) -> bool:
    """Files the index leaves out: bundles, minified files, vendored modules."""
    return "dist/" in relative or ".min." in relative or "node_modules" in relative


def count(root: Path) -> dict[str, int]:
    """Units and tokens of the code base at ``root`` under this process's parser."""
    # imported here: under --before this runs with another checkout's folders on the path
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from coderag_embedder.encoder import default_model_dir, unit_text
    from coderag_parser.languages import has_grammar, language_of
    from coderag_parser.units import parse_source

    hf_logging.set_verbosity_error()
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir(), local_files_only=True)
    out = {"files": 0, "lines": 0, "units": 0, "read": 0, "whole": 0, "small": 0}
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        language = language_of(path.name) if path.is_file() else None
        if skipped(relative) or not language or not has_grammar(language):
            continue
        text = path.read_text(errors="replace")
        out["files"] += 1
        out["lines"] += len(text.splitlines())
        for unit in parse_source("r", relative, language, text).units:
            tokens = len(tokenizer(unit_text(unit))["input_ids"])
            out["units"] += 1
            out["read"] += min(tokens, READ)
            out["whole"] += tokens
            out["small"] += min(tokens, READ) < SMALL
    return out


def count_in(checkout: Path, root: Path) -> dict[str, int]:
    """``count`` under another checkout's source folders, in a subprocess."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(checkout / f) for f in SOURCE_FOLDERS),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bench.unit_tokens", "--root", str(root), "--json"],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str]) -> int:
    """Print the table (or, with ``--root --json``, one code base's counts as JSON)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--corpus", action="append", default=[], help="a code base of bench.fetch")
    ap.add_argument("--before", type=Path, help="another checkout, counted the same way")
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.root is not None:
        print(json.dumps(count(args.root)))
        return 0
    # imported here: the --root subprocess runs under another checkout and needs no fetch
    from bench.fetch import corpus_root

    print("| code base | lines | units before → after | tokens read before → after | "
          f"tokens uncut | units under {SMALL} tokens |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.corpus:
        root = corpus_root(name)
        after = count(root)
        before = count_in(args.before, root) if args.before else after
        change = after["read"] / max(before["read"], 1) - 1
        print(f"| {name} | {after['lines']:,} | {before['units']:,} → {after['units']:,} | "
              f"{before['read']:,} → {after['read']:,} ({change:+.1%}) | "
              f"{before['whole']:,} → {after['whole']:,} | "
              f"{before['small']:,} → {after['small']:,} |")  # fmt: skip
    print(f"\ncommand: python -m bench.unit_tokens {' '.join(argv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
