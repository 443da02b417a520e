"""Retrieval benchmark: coderag's hybrid search against BM25 over units and plain vector RAG over
1000-character chunks (200 overlap), in the same run, on the pinned corpora of corpora.json.

    python -m bench.retrieval [--split test|test2|tune|tune2|all] [--corpus NAME ...] [--reuse]
                              [--out bench/results/retrieval.md] [--dump-features F.jsonl]

Every corpus belongs to a split (``"split"`` in corpora.json): the tuning split may be read and
tuned on, the test split is frozen and only measured. The report (R@1, R@5, MRR@10 by question
language, type, code language and corpus; call-chain coverage in the top 10; per-route and
per-component ablation; index time and search latency) gives the test split first.
``--dump-features`` writes the learned ranker's candidate features of the tuning split's
questions for ``coderag_training.fit.ranker``; ``--reuse`` keeps indexes of an earlier run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.setdefault("CODERAG_DATA_DIR", str(HERE / ".cache" / "data")))

from bench.baselines import Baselines, K  # noqa: E402
from bench.corpus import index_corpus, load_questions, overlaps  # noqa: E402
from bench.fetch import corpus_root, load_corpora, load_mining  # noqa: E402
from bench.ranker_rows import dump_doc_features, dump_features, dump_mined_features  # noqa: E402
from coderag import embedding  # noqa: E402
from coderag.settings import Settings, get_settings  # noqa: E402
from coderag.store import get_catalog  # noqa: E402
from coderag_embedder.queries import local  # noqa: E402
from coderag_retriever.index import get_index_cache  # noqa: E402
from coderag_retriever.retrieval import retrieve  # noqa: E402

embedding.use_local(local())  # this script's queries embed in-process

SPLITS = {
    "test": "Test split (frozen: nothing was tuned on it)",
    "test2": "Second test split (frozen: new code bases, questions written in users' styles)",
    "tune": "Tuning split (weights, constants and the learned ranker were fitted here)",
    "tune2": "Second tuning split (new code bases, questions written in users' styles)",
}
"""The splits of corpora.json, frozen ones first, with their report titles."""


def tunable(split: str) -> bool:
    """Whether a split may be read and tuned on."""
    return split.startswith("tune")


MISSES: list[dict] | None = None
"""With --misses, the fused search's questions whose gold is not in the top 5."""


def first_rank(results: list[tuple[str, int, int]], golds: list[dict]) -> int | None:
    """1-based rank of the first result that hits any gold."""
    for i, r in enumerate(results, 1):
        if any(overlaps(r, g) for g in golds):
            return i
    return None


def chain_coverage(results: list[tuple[str, int, int]], golds: list[dict]) -> float:
    """Share of a chain's links found in the results."""
    return sum(any(overlaps(r, g) for r in results) for g in golds) / len(golds)


ROUTE_NAMES = ("vector", "vector2", "keyword", "symbol", "exact", "cluster")
"""Routes that rank on their own (history only reorders the others' candidates)."""

DEFAULT = "coderag (default: learned ranker)"
"""The row of the shipped defaults."""


def _weights(settings: Settings, **changes: float) -> str:
    weights = {**settings.weights(), **changes}
    return ",".join(f"{k}:{v}" for k, v in weights.items())


def _without(settings: Settings, route: str) -> str:
    """Route weights with one route left out (not listed: the learned ranker cannot read it)."""
    return ",".join(f"{k}:{v}" for k, v in settings.weights().items() if k != route)


QUICK = False
"""With --quick: the default, the fused order and the few ablations that decide defaults."""

LEAN = False
"""With --lean: the default and the same search without the cross-encoder, no baselines."""

CHUNK_SPACES: tuple[str, ...] | None = None
"""Encoders of the plain-RAG baseline (None: every configured one)."""


def systems(settings: Settings) -> dict[str, Settings]:
    """coderag's default search, each route alone, and the search with one component changed."""
    learned_ = settings.model_copy(update={"ranker": "learned"})
    fused = settings.model_copy(update={"ranker": "fused"})
    dictionary = settings.zh_dictionary
    flip_dictionary = f"learned {'without' if dictionary else '+'} CC-CEDICT for Chinese words"
    rows = {DEFAULT: learned_, "coderag, fused order (RRF, no learned ranker)": fused}
    if LEAN:
        return {
            DEFAULT: learned_,
            "learned ranker without the cross-encoder": learned_.model_copy(
                update={"rerank_model": ""}
            ),
        }
    if QUICK:
        rows["learned without feedback"] = learned_.model_copy(
            update={"route_weights": _without(settings, "feedback")}
        )
        rows["learned without the Chinese vocabulary"] = learned_.model_copy(
            update={"zh_vocab": False}
        )
        rows[flip_dictionary] = learned_.model_copy(update={"zh_dictionary": not dictionary})
        rows["learned without call-graph expansion"] = learned_.model_copy(
            update={"expand_depth": 0}
        )
        return rows
    for route in ROUTE_NAMES:
        only = {r: float(r == route) for r in (*ROUTE_NAMES, "feedback", "history")}
        rows[f"route: {route} only"] = fused.model_copy(
            update={"route_weights": _weights(settings, **only), "expand_depth": 0}
        )
    for route in ("vector", "vector2", "keyword", "symbol", "exact", "feedback"):
        rows[f"learned without {route}"] = learned_.model_copy(
            update={"route_weights": _without(settings, route)}
        )
    rows["learned + cluster route"] = learned_.model_copy(
        update={"route_weights": _weights(settings, cluster=1.0)}
    )
    rows["learned without call-graph expansion"] = learned_.model_copy(update={"expand_depth": 0})
    rows["learned without the Chinese vocabulary"] = learned_.model_copy(update={"zh_vocab": False})
    rows[flip_dictionary] = learned_.model_copy(update={"zh_dictionary": not dictionary})
    rows["fused without the Chinese vocabulary"] = fused.model_copy(update={"zh_vocab": False})
    rows["fused without call-graph expansion"] = fused.model_copy(update={"expand_depth": 0})
    rows["fused + MMR (0.8)"] = fused.model_copy(update={"mmr_lambda": 0.8})
    return rows


def evaluate(
    corpora: list[dict],
    reuse: bool,
    features_out: Path | None,
    dump_only: bool = False,
    doc_questions: int = 0,
    mined: int = 0,
) -> str:
    """Run every system on every question; return the markdown report."""
    settings = get_settings()
    stats: dict[str, dict[str, dict[str, list]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    meta_rows: dict[str, list[str]] = defaultdict(list)
    latencies: dict[str, list[float]] = defaultdict(list)
    sink = features_out.open("w", encoding="utf-8") if features_out else None
    for corpus in corpora:
        name, split = corpus["name"], corpus.get("split", "tune")
        root = corpus_root(name)
        index_s, reused = index_corpus(corpus, reuse)
        catalog = get_catalog()
        repo = catalog.get_repo(name)
        lines = catalog.total_lines(name)
        questions = [q for q in load_questions(name) if q["type"] != "absent"]
        if sink is not None and tunable(split):
            dump_features(name, questions, settings, sink)
        if dump_only:
            continue
        silhouette = None
        if not QUICK:
            from coderag_retriever.clustering import refresh as refresh_clusters

            silhouette = refresh_clusters(catalog, name, settings)  # for the +cluster row
            get_index_cache().forget(name)  # the next query loads the fresh cluster labels
        base = None if LEAN else Baselines(name, root, spaces=CHUNK_SPACES)
        print(f"{name}: {len(questions)} questions", file=sys.stderr, flush=True)
        meta_rows[split].append(
            f"| {name} {corpus['version']} | {corpus['language']} | {repo.files} | "
            f"{lines} | {repo.units} | {'(reused)' if reused else f'{index_s:.1f}'} | "
            f"{len(base.chunks) if base else 0} | {base.chunk_embed_s if base else 0:.1f} | "
            f"{silhouette or 0:.2f} |"
        )
        retrieve(name, "warm up", K, settings, with_code=False)
        rows = systems(settings)
        for q in questions:
            runs: dict[str, list[tuple[str, int, int]]] = {}
            for label, s in rows.items():
                t = time.perf_counter()
                # /search's own path: readiness, the search slot and the gate's verdict included
                hits = retrieve(name, q["query"], K, s, with_code=False).hits
                if label == DEFAULT:
                    latencies[split].append((time.perf_counter() - t) * 1000)
                runs[label] = [(h.file, h.start_line, h.end_line) for h in hits]
            if base is not None:
                runs["baseline: BM25 over units"] = base.bm25_rank(q["query"])
                runs["baseline: vector RAG, 1000-char chunks"] = base.vector_rank(q["query"])
            if base is not None and "vector2" in base.encoders:
                runs["baseline: vector RAG, 1000-char chunks, second encoder"] = base.vector_rank(
                    q["query"], "vector2"
                )
            if MISSES is not None and tunable(split):
                r = first_rank(runs[DEFAULT], q["gold"])
                if r is None or r > 5:
                    MISSES.append(
                        {
                            "id": q["id"],
                            "type": q["type"],
                            "query": q["query"],
                            "gold": q["gold"],
                            "rank": r,
                            "top": runs[DEFAULT][:5],
                        }
                    )
            for label, results in runs.items():
                r = first_rank(results, q["gold"])
                for group in ("all", q["lang"], q["type"], corpus["language"], name):
                    stats[split][label][group].append(r)
                if q["type"] == "chain":
                    stats[split][label]["chain_cov"].append(chain_coverage(results, q["gold"]))
    if sink is not None:
        for corpus in corpora:
            if corpus.get("split", "tune") == "tune" and doc_questions:
                dump_doc_features(corpus, reuse, settings, sink, doc_questions)
        for entry in load_mining() if mined else ():
            dump_mined_features(entry, reuse, settings, sink, mined)
        sink.close()
    out = []
    for split, title in SPLITS.items():
        if split in stats:
            out.append(f"## {title}\n")
            out.append(report(stats[split], meta_rows[split], latencies[split]))
    return "\n".join(out)


def _metrics(ranks: list[int | None]) -> str:
    if not ranks:
        return "– | – | –"
    n = len(ranks)
    r1 = sum(1 for r in ranks if r == 1) / n
    r5 = sum(1 for r in ranks if r is not None and r <= 5) / n
    mrr = sum(1 / r for r in ranks if r is not None and r <= K) / n
    return f"{r1:.2f} | {r5:.2f} | {mrr:.2f}"


LANGUAGES = ("python", "go", "typescript", "java", "rust", "javascript")
"""Code languages a corpus can be in (its ``language`` in corpora.json)."""


def report(stats: dict, meta_rows: list[str], latencies: list[float]) -> str:
    """The markdown tables of one split."""
    out = [
        "### Corpora and index time",
        "",
        "| corpus | language | files | lines | units | index s | baseline chunks | chunk embed s "
        "| cluster silhouette |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *meta_rows,
        "",
    ]
    first = next(iter(stats.values()))
    groups = [g for g in ("all", "en", "zh", "lookup", "descriptive", "chain") if first.get(g)]
    n = {g: len(first[g]) for g in groups}
    head = " | ".join(f"{g} (n={n[g]}) R@1 | R@5 | MRR@10" for g in groups)
    out += [
        "### Retrieval quality (gold = a hit overlapping any gold range)",
        "",
        f"| system | {head} | chain coverage@10 |",
        "| --- |" + " --- |" * (3 * len(groups) + 1),
    ]
    for label, s in stats.items():
        cov = s.get("chain_cov", [])
        cells = " | ".join(_metrics(s[g]) for g in groups)
        out.append(f"| {label} | {cells} | {statistics.mean(cov) if cov else 0:.2f} |")
    langs = [g for g in LANGUAGES if first.get(g)]
    corpora = [
        g
        for g in first
        if g not in groups
        and g not in LANGUAGES
        and g not in ("chain_cov", "en", "zh")
        and g not in ("lookup", "descriptive", "chain")
    ]
    for title, cols in (("code language", langs), ("corpus", corpora)):
        out += [
            "",
            f"### Per {title} (R@1 / R@5 / MRR@10)",
            "",
            "| system | " + " | ".join(f"{c} (n={len(first[c])})" for c in cols) + " |",
            "| --- |" + " --- |" * len(cols),
        ]
        for label, s in stats.items():
            out.append(
                f"| {label} | "
                + " | ".join(_metrics(s[c]).replace(" | ", " / ") for c in cols)
                + " |"
            )
    lat = sorted(latencies)
    if lat:
        p50 = lat[len(lat) // 2]
        p95 = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
        out += [
            "",
            f"Search latency (default system, in-process, {len(lat)} queries): p50 {p50:.1f} ms, "
            f"p95 {p95:.1f} ms.",
            "",
        ]
    return "\n".join(out)


def main() -> int:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", help="only these corpora")
    ap.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    ap.add_argument("--reuse", action="store_true", help="keep indexes of an earlier run")
    ap.add_argument(
        "--keep-data",
        action="store_true",
        help="index every corpus again, but keep the data directory (its embedding cache)",
    )
    ap.add_argument("--out", default=str(HERE / "results" / "retrieval.md"))
    ap.add_argument("--misses", help="write the tuning split's misses to this JSON file")
    ap.add_argument("--dump-features", help="write the tuning split's ranker features here")
    ap.add_argument("--dump-only", action="store_true", help="index and dump features, no report")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="only the default, the fused order and three ablations; MiniLM chunks for RAG",
    )
    ap.add_argument(
        "--minilm-chunks",
        action="store_true",
        help="every row, but the plain-RAG baseline over MiniLM chunks only (the second "
        "encoder's chunks take hours on 2 cores)",
    )
    ap.add_argument(
        "--doc-questions",
        type=int,
        default=0,
        help="with --dump-features: also this many doc-comment questions per tuning corpus",
    )
    ap.add_argument(
        "--mined",
        type=int,
        default=0,
        help="with --dump-features: also this many mined questions per code base of "
        "bench/mining.json (bench/mine.py --all first)",
    )
    ap.add_argument(
        "--lean",
        action="store_true",
        help="only the default and the default without the cross-encoder; no baselines",
    )
    args = ap.parse_args()
    global MISSES, QUICK, CHUNK_SPACES, LEAN
    LEAN = args.lean
    MISSES = [] if args.misses else None
    QUICK = args.quick
    CHUNK_SPACES = ("vector",) if args.quick or args.minilm_chunks else None
    corpora = [
        c
        for c in load_corpora()
        if (not args.corpus or c["name"] in args.corpus)
        and args.split in ("all", c.get("split", "tune"))
    ]
    # Cold start unless asked: a warm embedding cache would make index times meaningless.
    if not (args.reuse or args.keep_data):
        shutil.rmtree(DATA, ignore_errors=True)
    features_out = Path(args.dump_features) if args.dump_features else None
    text = evaluate(
        corpora, args.reuse, features_out, args.dump_only, args.doc_questions, args.mined
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, "utf-8")
    print(text)
    if args.misses:
        Path(args.misses).write_text(json.dumps(MISSES, indent=1, ensure_ascii=False), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
