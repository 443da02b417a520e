"""Retrieval benchmark: coderag's hybrid search against BM25 over units and plain vector RAG over
1000-character chunks (200 overlap), in the same run, on the pinned corpora of corpora.json.

    python bench/retrieval.py [--corpus NAME ...] [--out bench/results/retrieval.md]

Prints a markdown report (R@1, R@5, MRR@10 by question language and type, call-chain coverage in
the top 10, per-route ablation, index time and /search latency) and writes it to --out.
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
sys.path.insert(0, str(HERE))
DATA = HERE / ".cache" / "data"
os.environ.setdefault("CODERAG_DATA_DIR", str(DATA))

import bm25s  # noqa: E402
import numpy as np  # noqa: E402
from fetch import corpus_root, load_corpora  # noqa: E402

from coderag.queue import run_now  # noqa: E402
from coderag.settings import Settings, get_settings  # noqa: E402
from coderag.store import get_catalog  # noqa: E402
from coderag_embedder.encoder import get_encoders  # noqa: E402
from coderag_parser.files import indexable, read_source, walk  # noqa: E402
from coderag_retriever.index import get_index_cache  # noqa: E402
from coderag_retriever.search import rank  # noqa: E402

CHUNK_CHARS, CHUNK_OVERLAP = 1000, 200
"""The plain-RAG baseline's chunking (seed 003)."""

K = 10
"""Depth of every ranking."""

MISSES: list[dict] | None = None
"""With --misses, the fused search's questions whose gold is not in the top 5."""


def load_questions(name: str) -> list[dict]:
    """The questions of one corpus."""
    path = HERE / "questions" / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def overlaps(hit: tuple[str, int, int], gold: dict) -> bool:
    """Whether a (file, start, end) result overlaps a gold range."""
    f, s, e = hit
    return f == gold["file"] and s <= gold["end_line"] and gold["start_line"] <= e


def first_rank(results: list[tuple[str, int, int]], golds: list[dict]) -> int | None:
    """1-based rank of the first result that hits any gold."""
    for i, r in enumerate(results, 1):
        if any(overlaps(r, g) for g in golds):
            return i
    return None


def chain_coverage(results: list[tuple[str, int, int]], golds: list[dict]) -> float:
    """Share of a chain's links found in the results."""
    return sum(any(overlaps(r, g) for r in results) for g in golds) / len(golds)


def chunks(root: Path) -> list[tuple[str, int, int, str]]:
    """1000-character chunks with 200 overlap of every indexable file: (file, start, end, text)."""
    out = []
    for rel in walk(root):
        if indexable(rel) is None:
            continue
        text, _ = read_source(root / rel, 1_000_000)
        if not text:
            continue
        step = CHUNK_CHARS - CHUNK_OVERLAP
        for start in range(0, max(len(text) - CHUNK_OVERLAP, 1), step):
            piece = text[start : start + CHUNK_CHARS]
            first = text.count("\n", 0, start) + 1
            out.append((rel, first, first + piece.count("\n"), piece))
    return out


class Baselines:
    """BM25 over coderag's units and vector search over plain chunks."""

    def __init__(self, repo: str, root: Path) -> None:
        units = get_catalog().units(repo)
        self.units = [(u.file, u.start_line, u.end_line) for u in units]
        self.bm25 = bm25s.BM25()
        self.bm25.index(
            bm25s.tokenize([u.text for u in units], stopwords="en", show_progress=False),
            show_progress=False,
        )
        t = time.perf_counter()
        self.chunks = chunks(root)
        self.encoders = get_encoders()
        self.chunk_vecs = {
            space: enc.encode([c[3] for c in self.chunks]) for space, enc in self.encoders.items()
        }
        self.chunk_embed_s = time.perf_counter() - t

    def bm25_rank(self, query: str) -> list[tuple[str, int, int]]:
        """Top units by plain BM25."""
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self.bm25.retrieve(tokens, k=min(K, len(self.units)), show_progress=False)
        return [self.units[d] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def vector_rank(self, query: str, space: str = "vector") -> list[tuple[str, int, int]]:
        """Top chunks by cosine similarity under one encoder."""
        q = self.encoders[space].encode_query([query])[0]
        order = np.argsort(-(self.chunk_vecs[space] @ q))[:K]
        return [self.chunks[i][:3] for i in order]


ROUTE_NAMES = ("vector", "vector2", "keyword", "symbol", "exact", "cluster")
"""Routes that rank on their own (history only reorders the others' candidates)."""


def _weights(settings: Settings, **changes: float) -> str:
    weights = {**settings.weights(), **changes}
    return ",".join(f"{k}:{v}" for k, v in weights.items())


def systems(settings: Settings) -> dict[str, Settings]:
    """coderag's fused search, each route alone, and the fused search with one stage changed."""
    rows = {"coderag (fused)": settings}
    for route in ROUTE_NAMES:
        only = {r: (1.0 if r == route else 0.0) for r in (*ROUTE_NAMES, "history")}
        rows[f"route: {route} only"] = settings.model_copy(
            update={"route_weights": _weights(settings, **only)}
        )
    for route in ("vector", "vector2", "keyword", "symbol", "exact"):
        rows[f"fused without {route}"] = settings.model_copy(
            update={"route_weights": _weights(settings, **{route: 0.0})}
        )
    rows["fused + cluster route"] = settings.model_copy(
        update={"route_weights": _weights(settings, cluster=1.0)}
    )
    rows["fused without call-graph expansion"] = settings.model_copy(update={"expand_depth": 0})
    rows["fused, seed-004 weighted vote"] = settings.model_copy(
        update={
            "fusion": "vote",
            "route_weights": _weights(settings, symbol=0.4, vector=0.35, keyword=0.25, exact=1.0),
        }
    )
    rows["fused + MMR (0.8)"] = settings.model_copy(update={"mmr_lambda": 0.8})
    return rows


def evaluate(corpora: list[dict]) -> str:
    """Run every system on every question; return the markdown report."""
    settings = get_settings()
    stats: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    meta_rows = []
    latencies: list[float] = []
    for corpus in corpora:
        name = corpus["name"]
        root = corpus_root(name)
        catalog = get_catalog()
        try:
            catalog.get_repo(name)
            catalog.delete_repo(name)
        except Exception:
            pass
        from coderag.store import get_vectors

        get_vectors().drop(name)
        catalog.create_repo(name, str(root), None, None)
        t = time.perf_counter()
        run_now("coderag_parser.tasks.index_repo", {"repo": name})
        index_s = time.perf_counter() - t
        repo = catalog.get_repo(name)
        lines = sum(
            r["lines"] for r in catalog.db.read("SELECT lines FROM files WHERE repo=?", (name,))
        )
        from coderag_retriever.clusters import refresh as refresh_clusters

        silhouette = refresh_clusters(catalog, name, settings)  # for the +cluster row
        get_index_cache().forget(name)  # the next query loads the fresh cluster labels
        base = Baselines(name, root)
        meta_rows.append(
            f"| {name} {corpus['version']} | {corpus['language']} | {repo.files} | "
            f"{lines} | {repo.units} | {index_s:.1f} | {len(base.chunks)} | "
            f"{base.chunk_embed_s:.1f} | {silhouette or 0:.2f} |"
        )
        rank(name, "warm up", K, settings)
        for q in load_questions(name):
            if q["type"] == "absent":
                continue
            runs: dict[str, list[tuple[str, int, int]]] = {}
            for label, s in systems(settings).items():
                t = time.perf_counter()
                ranked = rank(name, q["query"], K, s)
                if label == "coderag (fused)":
                    latencies.append((time.perf_counter() - t) * 1000)
                runs[label] = [(r.unit.file, r.unit.start_line, r.unit.end_line) for r in ranked]
            runs["baseline: BM25 over units"] = base.bm25_rank(q["query"])
            runs["baseline: vector RAG, 1000-char chunks"] = base.vector_rank(q["query"])
            if "vector2" in base.encoders:
                runs["baseline: vector RAG, 1000-char chunks, second encoder"] = base.vector_rank(
                    q["query"], "vector2"
                )
            if MISSES is not None:
                r = first_rank(runs["coderag (fused)"], q["gold"])
                if r is None or r > 5:
                    MISSES.append(
                        {
                            "id": q["id"],
                            "type": q["type"],
                            "query": q["query"],
                            "gold": q["gold"],
                            "rank": r,
                            "top": runs["coderag (fused)"][:5],
                        }
                    )
            for label, results in runs.items():
                r = first_rank(results, q["gold"])
                for group in ("all", q["lang"], q["type"], name):
                    stats[label][group].append(r)
                if q["type"] == "chain":
                    stats[label]["chain_cov"].append(chain_coverage(results, q["gold"]))
    return report(stats, meta_rows, latencies)


def _metrics(ranks: list[int | None]) -> str:
    if not ranks:
        return "– | – | –"
    n = len(ranks)
    r1 = sum(1 for r in ranks if r == 1) / n
    r5 = sum(1 for r in ranks if r is not None and r <= 5) / n
    mrr = sum(1 / r for r in ranks if r is not None and r <= K) / n
    return f"{r1:.2f} | {r5:.2f} | {mrr:.2f}"


def report(stats: dict, meta_rows: list[str], latencies: list[float]) -> str:
    """The markdown tables."""
    out = [
        "### Corpora and index time",
        "",
        "| corpus | language | files | lines | units | index s | baseline chunks | chunk embed s "
        "| cluster silhouette |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *meta_rows,
        "",
    ]
    groups = ["all", "en", "zh", "lookup", "descriptive", "chain"]
    n = {g: len(next(iter(stats.values()))[g]) for g in groups}
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
        out.append(f"| {label} | {cells} | {statistics.mean(cov):.2f} |")
    corpora = [g for g in next(iter(stats.values())) if g not in groups and g != "chain_cov"]
    out += [
        "",
        "### Per corpus (R@1 | R@5 | MRR@10)",
        "",
        "| system | " + " | ".join(corpora) + " |",
        "| --- |" + " --- |" * len(corpora),
    ]
    for label, s in stats.items():
        out.append(
            f"| {label} | "
            + " | ".join(_metrics(s[c]).replace(" | ", " / ") for c in corpora)
            + " |"
        )
    lat = sorted(latencies)
    p50 = lat[len(lat) // 2]
    p95 = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
    out += [
        "",
        f"Search latency (fused, in-process, {len(lat)} queries): p50 {p50:.1f} ms, "
        f"p95 {p95:.1f} ms.",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", help="only these corpora")
    ap.add_argument("--out", default=str(HERE / "results" / "retrieval.md"))
    ap.add_argument("--misses", help="write the fused search's misses to this JSON file")
    args = ap.parse_args()
    global MISSES
    MISSES = [] if args.misses else None
    corpora = [c for c in load_corpora() if not args.corpus or c["name"] in args.corpus]
    # Cold start every run: a warm embedding cache would make index times meaningless.
    shutil.rmtree(DATA, ignore_errors=True)
    text = evaluate(corpora)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, "utf-8")
    print(text)
    if args.misses:
        Path(args.misses).write_text(json.dumps(MISSES, indent=1, ensure_ascii=False), "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
