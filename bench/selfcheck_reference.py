"""Reference figures for ``coderag eval``: the same self-check on the benchmark's pinned code bases.

Runs ``selfscore.evaluate`` (no git root, so doc questions only; the command's default limit) on
every tuning code base (splits ``tune`` and ``tune2``; the frozen test splits are never read)
already indexed in ``bench/.cache/data``, and writes, per kind, the median and range of coderag's
and BM25's figures to ``coderag_retriever/selfscore_reference.json``, which ``coderag eval``
prints beside a repository's own figures.

    nice -n 10 python -m bench.selfcheck_reference

Commit questions get no reference: the pinned code bases are release archives without git
history. Index the code bases first (``python -m bench.retrieval --split tune --keep-data``).
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.setdefault("CODERAG_DATA_DIR", str(HERE / ".cache" / "data")))

from bench.fetch import load_corpora  # noqa: E402
from coderag.errors import NotFound  # noqa: E402
from coderag.settings import get_settings  # noqa: E402
from coderag.store import get_catalog  # noqa: E402
from coderag_retriever.selfscore import REFERENCE_FILE, evaluate  # noqa: E402

SPLITS = ("tune", "tune2")
"""Splits whose code bases make the reference; the test splits stay unseen."""

LIMIT = 100
"""Questions per code base: ``coderag eval``'s default ``--limit``."""

METRICS = ("r_at_1", "r_at_5", "mrr_at_10")
"""Figures summarised per system."""

COMMAND = "nice -n 10 python -m bench.selfcheck_reference"
"""How the file was made, recorded in it."""

NO_COMMIT_REFERENCE = (
    "no pinned reference: the benchmark's code bases are release archives without git history, "
    "so they make no commit questions; read a repository's commit figure against BM25's on the "
    "same questions"
)
"""Why commit questions have no reference figures."""


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max of per-code-base figures."""
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def summarise(per_base: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The doc kind's entry: how many code bases, their names and each system's spreads."""
    names = sorted(per_base)
    return {
        "code_bases": len(names),
        "names": names,
        "questions": spread([float(per_base[n]["n"]) for n in names]),
        **{
            system: {m: spread([per_base[n][system][m] for n in names]) for m in METRICS}
            for system in ("coderag", "bm25")
        },
    }


def main() -> int:
    """Score every indexed tuning code base and write the reference file."""
    settings = get_settings()
    catalog = get_catalog()
    per_base: dict[str, dict[str, Any]] = {}
    for corpus in load_corpora():
        name = corpus["name"]
        if corpus.get("split", "tune") not in SPLITS:
            continue
        try:
            ready = catalog.get_repo(name).status == "ready"
        except NotFound:
            ready = False
        if not ready:
            print(f"{name}: not indexed in {DATA}, skipped", file=sys.stderr)
            continue
        report = evaluate(name, None, LIMIT, settings)
        doc = report.figures().get("doc")
        if doc is None:
            print(f"{name}: no doc questions, skipped", file=sys.stderr)
            continue
        per_base[name] = doc
        print(
            f"{name}: n={doc['n']} coderag R@5 {doc['coderag']['r_at_5']:.2f} "
            f"bm25 R@5 {doc['bm25']['r_at_5']:.2f} ({report.seconds:.1f} s)",
            file=sys.stderr,
        )
    if not per_base:
        print("no indexed tuning code base: nothing written", file=sys.stderr)
        return 1
    out = {
        "about": "coderag eval's self-check on the benchmark's pinned tuning code bases "
        f"(splits {', '.join(SPLITS)}), doc questions only, --limit {LIMIT}",
        "command": COMMAND,
        "date": datetime.date.today().isoformat(),
        "limit": LIMIT,
        "splits": list(SPLITS),
        "kinds": {
            "doc": summarise(per_base),
            "commit": {"code_bases": 0, "note": NO_COMMIT_REFERENCE},
        },
        "per_code_base": per_base,
    }
    REFERENCE_FILE.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {REFERENCE_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
