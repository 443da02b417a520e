"""The parse stage's steps, timed for several checkouts of coderag in one run: the parse (the
parser pool, started fresh), the catalog write of every file's rows (``replace_files``) and the
keyword publication, on the same prepared tree, each checkout in its own process, alternating.

    git worktree add /tmp/before <commit>
    python -m bench.parse_stage /tmp/before . [--corpus django:100000] [--rounds 3]

Prints the load average before the run and each checkout's median seconds per step. These steps
are what a first index waits for before it is searchable. Timings only count on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

STEPS = ("parse", "replace_files", "publish")
"""What one round times, in order."""


def one_round(tree: Path) -> dict[str, float]:
    """Run the steps once in this process, with a fresh data directory (the checkout to time is
    the one on PYTHONPATH)."""
    import time

    os.environ["CODERAG_DATA_DIR"] = tempfile.mkdtemp(prefix="parse-stage-")
    from coderag import chain
    from coderag.schemas import Unit
    from coderag.settings import get_settings
    from coderag.store import get_catalog
    from coderag_parser.files import indexable, walk
    from coderag_parser.languages import language_of
    from coderag_parser.parsing import parse_all

    settings = get_settings()
    catalog = get_catalog()
    catalog.create_repo("p", str(tree), None, None)
    reg = catalog.registration("p")
    paths = [r for r in sorted(walk(tree)) if indexable(r) and language_of(r)]
    try:  # a checkout with issue 42's typed jobs; an older one takes plain tuples
        from coderag_parser.file_rows import FileJob
    except ImportError:
        FileJob = None  # type: ignore[assignment,misc]
    jobs = []
    for r in paths:
        fields = (
            "p", str(tree), r, language_of(r), settings.max_file_bytes, settings.deprecated_markers
        )  # fmt: skip
        jobs.append(FileJob(*fields) if FileJob is not None else fields)
    out: dict[str, float] = {}
    start = time.perf_counter()
    parsed = parse_all(jobs, settings.workers(), "p")
    out["parse"] = time.perf_counter() - start
    start = time.perf_counter()
    if parsed and not isinstance(parsed[0], dict):  # a checkout with issue 42's typed rows
        typed = [r for r in parsed if hasattr(r, "units")]
        files = [r.file for r in typed]
        units = [u for r in typed for u in r.units]
        symbols = [s for r in typed for s in r.symbols]
        calls = [c for r in typed for c in r.calls]
        imports = [i for r in typed for i in r.imports]
    else:  # an older checkout: tuples in, dicts out
        rows = [r for r in parsed if "skip" not in r]
        files = [(r["path"], r["language"], r["lines"], r["sha"]) for r in rows]
        units = [Unit(**u) for r in rows for u in r["units"]]
        symbols = [s for r in rows for s in r["symbols"]]
        calls = [c for r in rows for c in r["calls"]]
        imports = [i for r in rows for i in r["imports"]]
    catalog.replace_files(
        "p",
        files,
        units,
        symbols=symbols,
        calls=calls,
        imports=imports,
        registration=reg,
        blamed=False,
    )
    out["replace_files"] = time.perf_counter() - start
    start = time.perf_counter()
    chain.publish_keywords(catalog, "p", reg, settings)
    out["publish"] = time.perf_counter() - start
    return out


def main() -> int:
    """Time every checkout's steps, alternating, and print the medians."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkouts", type=Path, nargs="+", help="checkouts of coderag to compare")
    ap.add_argument("--corpus", default="django:100000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--round", type=Path, help=argparse.SUPPRESS)  # a child process's tree
    args = ap.parse_args()
    if args.round:
        print(json.dumps(one_round(args.round)))
        return 0
    from bench.index_ab import python_path
    from bench.index_speed import prepare

    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        tree = prepare(args.corpus, Path(tmp))
        times: dict[Path, list[dict[str, float]]] = {c: [] for c in args.checkouts}
        for _ in range(args.rounds):
            for checkout in args.checkouts:
                env = {**os.environ, "PYTHONPATH": python_path(checkout)}
                cmd = [
                    sys.executable,
                    "-m",
                    "bench.parse_stage",
                    "--round",
                    str(tree),
                    str(checkout),
                ]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                times[checkout].append(json.loads(done.stdout.splitlines()[-1]))
    for checkout, rounds in times.items():
        medians = {s: statistics.median(r[s] for r in rounds) for s in STEPS}
        shown = ", ".join(f"{s} {v:.2f} s" for s, v in medians.items())
        print(f"{checkout}: {shown} (median of {len(rounds)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
