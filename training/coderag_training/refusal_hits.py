"""Retrieve the refusal rule's tuning questions as ``/ask`` retrieves them, each with a ranker
that never saw its code base, and keep the hits the rule is fitted on.

    CODERAG_DATA_DIR=bench/.cache/data python -m coderag_training.refusal_hits FOLDS \\
        [--only NAME ...] [--out DIR]

``FOLDS`` is ``coderag_training.fit.ranker --fold-rankers``' folder. The questions are the tuning
corpora's (splits ``tune`` and ``tune2``) and the written training questions of every
``wtrain`` code base indexed in ``CODERAG_DATA_DIR`` (``make models`` indexes the smallest
``RANKER_CODE_BASES``). Each code base's hits go to ``DIR/<name>.json`` (default
``bench/.cache/answers-hits``, the folder ``bench/answers.py`` keeps them in, in its format: per
question ``[hits, milliseconds]``), which ``coderag_training.fit.refusal`` reads. Out of sample
matters: the shipped ranker was fitted on these code bases, and its confidence on a question it
was trained on is not the confidence a new user's code base gets. Nothing here reads a frozen
split.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from coderag import embedding
from coderag.errors import NotFound
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_embedder.queries import local
from coderag_generator.asking import RETRIEVE_K
from coderag_retriever import retrieval
from coderag_training import pins
from coderag_training.fit.ranker import fold_ranker, splits

OUT = pins.CACHE / "answers-hits"
"""Where the hits go by default (``bench/answers.py``'s folder)."""


def question_file(name: str) -> Path:
    """A tuning corpus's questions, or a written training code base's."""
    own = pins.QUESTIONS / f"{name}.jsonl"
    return own if own.is_file() else pins.QUESTIONS / "written" / f"{name}.jsonl"


def written_training() -> list[str]:
    """The written training code bases: mined ones with written questions, in name order."""
    return sorted(
        e["name"]
        for e in pins.load_mining()
        if (pins.QUESTIONS / "written" / f"{e['name']}.jsonl").is_file()
    )


def tuning() -> list[str]:
    """The tuning corpora (splits ``tune`` and ``tune2``)."""
    return [c["name"] for c in pins.load_corpora() if c.get("split", "tune").startswith("tune")]


def code_bases() -> list[str]:
    """The tuning corpora, then the written training code bases whose index is complete here."""
    catalog = get_catalog()
    written = []
    for name in written_training():
        try:
            if catalog.get_repo(name).complete:
                written.append(name)
        except NotFound:
            continue  # not indexed here: its questions are left out
    return tuning() + written


def collect(name: str, folds: Path, out: Path) -> int:
    """Retrieve one code base's questions with its fold ranker; write the hits; the count."""
    ranker = fold_ranker(folds, name, splits())
    if not ranker.is_file():
        raise SystemExit(f"{ranker}: missing; run coderag_training.fit.ranker --fold-rankers")
    settings = get_settings().model_copy(update={"ranker_path": str(ranker)})
    kept = []
    for q in pins.read_jsonl(question_file(name)):
        start = time.perf_counter()
        hits = retrieval.retrieve(name, q["query"], RETRIEVE_K, settings).hits
        took = (time.perf_counter() - start) * 1000
        kept.append([[h.model_dump(mode="json") for h in hits], took])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(kept), "utf-8")
    return len(kept)


def main(argv: list[str]) -> int:
    """Collect every code base's hits (or ``--only`` these)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("folds", type=Path, help="fit.ranker --fold-rankers' folder")
    ap.add_argument("--only", action="append", default=[], help="this code base only")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    embedding.use_local(local())
    names = args.only or code_bases()
    started = time.monotonic()
    for i, name in enumerate(names, 1):
        count = collect(name, args.folds, args.out)
        print(f"[{i}/{len(names)}] {name}: {count} questions "
              f"({time.monotonic() - started:.0f} s)", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
