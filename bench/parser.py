"""Parser throughput against raw tree-sitter parsing of the same files, in the same run, on one
core: lines per second of ``parse_source`` (query, units, facts, symbols, calls) and of a bare
``Parser.parse``.

    python -m bench.parser [--corpus NAME ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from bench.fetch import corpus_root, load_corpora  # noqa: E402
from coderag_parser.files import indexable, read_source, walk  # noqa: E402
from coderag_parser.languages import has_grammar, parser  # noqa: E402
from coderag_parser.units import parse_source  # noqa: E402


def sources(root: Path) -> list[tuple[str, str, str]]:
    """(path, language, text) of every file with a grammar."""
    out = []
    for rel in walk(root):
        lang = indexable(rel)
        if lang and has_grammar(lang):
            text, _ = read_source(root / rel, 1_000_000)
            if text:
                out.append((rel, lang, text))
    return out


def best_of(repeat: int, fn) -> float:
    """Fastest of ``repeat`` timed runs, in seconds."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    """Print one markdown row per corpus."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("| corpus | files | lines | raw tree-sitter lines/s | coderag parser lines/s | share |")
    print("| --- | --- | --- | --- | --- | --- |")
    for c in load_corpora():
        if args.corpus and c["name"] not in args.corpus:
            continue
        files = sources(corpus_root(c["name"]))
        encoded = [(rel, lang, text, text.encode()) for rel, lang, text in files]
        lines = sum(t.count("\n") + 1 for _, _, t in files)
        for _, lang, _, _ in encoded:
            parser(lang)  # grammar loading is start-up cost, not throughput

        def raw(enc=encoded) -> None:
            for _, lang, _, data in enc:
                parser(lang).parse(data)

        def ours(enc=encoded, name=c["name"]) -> None:
            for rel, lang, text, _ in enc:
                parse_source(name, rel, lang, text)

        t_raw, t_ours = best_of(args.repeat, raw), best_of(args.repeat, ours)
        print(
            f"| {c['name']} {c['version']} | {len(files)} | {lines} | {lines / t_raw:,.0f} | "
            f"{lines / t_ours:,.0f} | {t_raw / t_ours:.0%} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
