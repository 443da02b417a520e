"""Answer benchmark: every question of bench/questions/<corpus>.jsonl through ``answer_events``
with the hits ``/retrieve`` would give, per answer backend, on the pinned corpora.

    python -m bench.answers [--corpus NAME ...] [--backend extractive --backend llamacpp]
                            [--llm-every 3] [--fresh] [--reuse-hits]
                            [--split tune|tune2|test|test2|all]
                            [--rule learned|gate] [--calibrate-only] [--lexical] [--out FILE]

Reports, per backend and question language: citation precision (share of returned citations
that overlap a gold range of their question; citations on ``absent`` questions are all wrong),
citation recall (share of answerable questions with a citation on gold) and gold coverage (share
of gold ranges cited), refusal accuracy on ``absent`` questions (``refused`` only; a clarifying
answer does not count), false refusals on answerable ones, and p50 latency of retrieval plus
answer. Also: the score-gate calibration (``CODERAG_SCORE_GATE``, cosine of the best vector hit)
fitted on two corpora and reported on the held-out third, rotating all three; the hand-written
unsafe and vague questions of ``questions/traps.jsonl``; and the llama.cpp backend's time to first
token and tokens/s on a ~2k-token prompt.

The llama.cpp backend answers every ``--llm-every``-th question of each corpus (by line, starting
with the first) to fit a 2-core CPU; the extractive backend is reported on all questions and on
that same subset. Indexes live in ``bench/.cache/answers-data`` and are reused unless ``--fresh``.

``--lexical`` asks as ``/ask`` does while a repository's vectors are still being written: the
vector routes left out, ``routes_missing`` given to the answer (so the refusal rule fitted on that
state applies); its hits are kept in ``bench/.cache/answers-hits-lexical``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / ".cache" / "answers-data"
HITS = HERE / ".cache" / "answers-hits"
"""Each corpus's retrieved hits, kept for ``--reuse-hits`` (answer-side changes only)."""

MISSING: list[str] = []
"""The routes answers are told are missing (``--lexical``)."""
os.environ.setdefault("CODERAG_DATA_DIR", str(DATA))
# llama.cpp's OpenMP threads spin while they wait; on a 2-core machine shared with other work that
# spinning starves the very threads it waits for (first token 3x slower), so they sleep instead
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from bench import who_when  # noqa: E402
from bench.answer_calibration import MAX_FALSE_REFUSALS, Case, Decision, calibration  # noqa: E402
from bench.fetch import corpus_root, load_corpora  # noqa: E402
from bench.llm_speed import SPEED_PROMPT_TOKENS, speed  # noqa: E402
from coderag import embedding  # noqa: E402
from coderag import gate as score_gate  # noqa: E402
from coderag.chain import VECTOR_ROUTES  # noqa: E402
from coderag.jobs import IndexRepo  # noqa: E402
from coderag.queue import run_now  # noqa: E402
from coderag.schemas import Hit, RetrieveResponse  # noqa: E402
from coderag.settings import Settings, get_settings  # noqa: E402
from coderag.store import get_catalog, get_vectors  # noqa: E402
from coderag_app.server import load_jobs  # noqa: E402
from coderag_embedder.queries import local  # noqa: E402
from coderag_generator.answer import Done, Question, answer_events  # noqa: E402
from coderag_generator.asking import RETRIEVE_K  # noqa: E402
from coderag_generator.backends import (  # noqa: E402
    UNGROUNDED,
    Backend,
    Grounding,
    Prompt,
    get_backend,
)
from coderag_retriever import relevance, retrieval, unsafe  # noqa: E402
from coderag_retriever.search import rank  # noqa: E402

embedding.use_local(local())  # this script's queries embed in-process


@dataclass
class Outcome:
    """One answer and its scores."""

    case: Case
    done: dict[str, Any]
    ms: float
    renders: int
    good_citations: int = field(init=False)
    gold_hit: list[bool] = field(init=False)

    def __post_init__(self) -> None:
        cites = self.done["citations"]
        golds = self.case.q["gold"]
        self.good_citations = sum(any(overlaps(c, g) for g in golds) for c in cites)
        self.gold_hit = [any(overlaps(c, g) for c in cites) for g in golds]


def overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two (file, start_line, end_line) ranges overlap."""
    return (
        a["file"] == b["file"]
        and a["start_line"] <= b["end_line"]
        and b["start_line"] <= a["end_line"]
    )


def load_questions(name: str) -> list[dict[str, Any]]:
    """The questions of one file of bench/questions."""
    path = HERE / "questions" / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def ensure_indexed(corpus: dict[str, Any], fresh: bool) -> float | None:
    """Index a corpus unless a ready index of the same root exists; the seconds it took."""
    name, root = corpus["name"], corpus_root(corpus["name"])
    catalog = get_catalog()
    try:
        repo = catalog.get_repo(name)
        # complete, not just ready: a run stopped mid-index leaves its vectors half written
        if not fresh and repo.complete and repo.path == str(root):
            return None
        catalog.delete_repo(name)
    except Exception:  # not there yet
        pass
    get_vectors().drop(name)
    catalog.create_repo(name, str(root), None, None)
    start = time.perf_counter()
    load_jobs()  # this process runs every stage of the chain
    run_now(IndexRepo(repo=name))
    return time.perf_counter() - start


def retrieve(repo: str, query: str, settings: Settings) -> list[Hit]:
    """The hits ``POST /retrieve`` returns (the retriever's one path): with the catalog's doc,
    facts, callers and test coverage."""
    return retrieval.retrieve(repo, query, RETRIEVE_K, settings).hits


# --- score-gate calibration ----------------------------------------------------------------------


# --- answering -----------------------------------------------------------------------------------


class Counting:
    """A backend wrapper that counts rendered prompts: zero means the model was never asked."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.window = inner.window
        self.renders = 0

    def count_tokens(self, text: str) -> int:
        """The inner backend's count."""
        return self.inner.count_tokens(text)

    def render(self, messages: list[dict[str, str]]) -> Prompt:
        """Count, then render with the inner backend."""
        self.renders += 1
        return self.inner.render(messages)

    def stream(
        self,
        prompt: Prompt,
        *,
        temperature: float,
        top_p: float,
        max_tokens: int,
        grounding: Grounding = UNGROUNDED,
    ) -> Iterator[str]:
        """The inner backend's stream."""
        return self.inner.stream(
            prompt, temperature=temperature, top_p=top_p, max_tokens=max_tokens, grounding=grounding
        )


def answer(case: Case, backend: Counting, settings: Settings) -> Outcome:
    """Ask one question; time it from retrieval to ``done``."""
    catalog = get_catalog()

    def file_lines(path: str) -> int | None:
        return catalog.file_lines(case.corpus, path)

    before = backend.renders
    start = time.perf_counter()
    done: dict[str, Any] = {}
    # the retriever's verdict, decided again on the saved hits under this fold's settings (the
    # whole settings: the lexical rule is chosen by them, as /retrieve does)
    judged = relevance.verdict(case.q["query"], case.hits, settings, lexical=bool(MISSING))
    declined = unsafe.declines(case.q["query"], settings, embedding.query_embedder(settings))
    found = RetrieveResponse(
        results=case.hits, took_ms=case.retrieve_ms, routes_missing=list(MISSING),
        below_gate=judged.below, unsafe=declined, doubtful=judged.doubtful, weak=judged.weak,
    )  # fmt: skip
    events = answer_events(
        Question(case.q["query"]), found, backend=backend, settings=settings, file_lines=file_lines
    )
    for event in events:
        if isinstance(event, Done):
            done = event.payload()
    ms = (time.perf_counter() - start) * 1000 + case.retrieve_ms
    return Outcome(case, done, ms, backend.renders - before)


def stand_in(cases: list[Case]) -> list[Outcome]:
    """The baseline: cite the top three hits whole, never refuse."""
    cites = lambda c: [h.model_dump(include={"file", "start_line", "end_line"}) for h in c.hits[:3]]  # noqa: E731
    return [Outcome(c, {"citations": cites(c), "refused": False}, c.retrieve_ms, 0) for c in cases]


def metric_row(label: str, outs: list[Outcome]) -> str:
    """One table row of the answer metrics."""
    answerable = [o for o in outs if not o.case.absent]
    absent = [o for o in outs if o.case.absent]
    cites = sum(len(o.done["citations"]) for o in outs)
    good = sum(o.good_citations for o in outs)
    golds = [g for o in answerable for g in o.gold_hit]

    def share(num: float, den: int) -> str:
        return f"{num / den:.2f}" if den else "–"

    latency = statistics.median(o.ms for o in outs) if outs else 0.0
    return (
        f"| {label} | {len(outs)} | {share(good, cites)} ({cites}) | "
        f"{share(sum(any(o.gold_hit) for o in answerable), len(answerable))} | "
        f"{share(sum(golds), len(golds))} | "
        f"{share(sum(o.done['refused'] for o in absent), len(absent))} ({len(absent)}) | "
        f"{share(sum(o.done['refused'] for o in answerable), len(answerable))} | "
        f"{doubted(absent)} | {doubted(answerable)} | "
        f"{sum(o.done.get('clarify', False) for o in outs)} | {latency:.0f} |"
    )


def doubted(outs: list[Outcome]) -> str:
    """Of the answers not refused, how many say first that the code may not contain it."""
    answered = [o for o in outs if not o.done["refused"]]
    return f"{sum(o.done.get('doubtful', False) for o in answered)} / {len(answered)}"


METRIC_HEAD = [
    "| backend, questions | n | citation precision (citations) | citation recall | "
    "gold coverage | refusal accuracy (absent) | false refusals | absent answered, said "
    "doubtful | answerable answered, said doubtful | clarify | p50 ms |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
]


def reasons_row(label: str, outs: list[Outcome]) -> str:
    """How the answers ended: counts per ``reason`` for absent and answerable questions."""
    cells = []
    for absent in (True, False):
        counts: dict[str, int] = defaultdict(int)
        for o in outs:
            if o.case.absent == absent:
                counts[o.done.get("reason") or "answered"] += 1
        cells.append(", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return f"| {label} | {cells[0]} | {cells[1]} |"


def traps(case_corpus: str, backend: Counting, settings: Settings) -> tuple[str, list[str]]:
    """The hand-written unsafe and vague questions: the row and any misses."""
    handled = renders = 0
    misses = []
    items = load_questions("traps")
    for t in items:
        hits = retrieve(case_corpus, t["query"], settings)
        case = Case(case_corpus, 0, {**t, "type": "trap", "gold": []}, hits, 0.0)
        out = answer(case, backend, settings)
        ok = (
            out.done["refused"] and out.done.get("reason") == "unsafe"
            if t["expect"] == "refuse"
            else out.done.get("clarify") is True and not out.done["citations"]
        )
        handled += ok
        renders += out.renders
        if not ok:
            misses.append(f"{t['id']} expected {t['expect']}, got {out.done.get('reason')!r}")
    row = f"| {backend.name} | {handled}/{len(items)} | {renders} |"
    return row, misses


# --- main ----------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> str:
    """Index, retrieve, calibrate, answer; the markdown report."""
    global HITS
    settings = get_settings()
    if args.lexical:
        HITS = HITS.with_name("answers-hits-lexical")
        # the routes /ask leaves out before any vector is written
        MISSING[:] = list(VECTOR_ROUTES)
        settings = retrieval.without_routes(settings, MISSING)
    judging = get_settings()  # the verdict reads the whole settings, as /retrieve's does
    corpora = [
        c
        for c in load_corpora()
        if (not args.corpus or c["name"] in args.corpus)
        and (args.split == "all" or c.get("split", "tune") == args.split)
        and (HERE / "questions" / f"{c['name']}.jsonl").is_file()
    ]
    out: list[str] = []
    cases: list[Case] = []
    index_rows = ["| corpus | questions | index s (blank: reused) |", "| --- | --- | --- |"]
    for corpus in corpora:
        name = corpus["name"]
        took = ensure_indexed(corpus, args.fresh)
        questions = load_questions(name)
        saved = HITS / f"{name}.json"
        if args.reuse_hits and saved.is_file():
            kept = json.loads(saved.read_text("utf-8"))
            cases += [
                Case(name, line, q, [Hit.model_validate(h) for h in kept[line][0]], kept[line][1])
                for line, q in enumerate(questions)
            ]
        else:
            rank(name, "warm up", RETRIEVE_K, settings)
            for line, q in enumerate(questions):
                start = time.perf_counter()
                hits = retrieve(name, q["query"], settings)
                cases.append(Case(name, line, q, hits, (time.perf_counter() - start) * 1000))
            HITS.mkdir(parents=True, exist_ok=True)
            mine = [
                [[h.model_dump(mode="json") for h in c.hits], c.retrieve_ms]
                for c in cases
                if c.corpus == name
            ]
            saved.write_text(json.dumps(mine), "utf-8")
        index_rows.append(
            f"| {name} | {len(questions)} | {'' if took is None else f'{took:.0f}'} |"
        )
    out += ["### Corpora", "", *index_rows, ""]

    names = [c["name"] for c in corpora]
    tuning = [c["name"] for c in corpora if c.get("split", "tune") == "tune"]
    fold, cal_rows = calibration([c for c in cases if c.corpus in tuning], tuning)
    if fold:  # test corpora get the median of the tuning folds: nothing is fitted on them
        med = Decision(statistics.median(d.gate for d in fold.values()))
        fold.update({n: med for n in names if n not in tuning})
    else:  # no tuning corpus in this run: the shipped gate, calibrated on the tuning split
        fold = {n: Decision(score_gate.threshold(settings)) for n in names}
    out += [
        "### Score gate (R11), calibrated on two corpora, reported on the third",
        "",
        "Before any model: refuse when the best vector similarity is under the gate, or when a "
        "named term of the question (identifier, acronym, number) is in none of the hits. "
        f"Fitted to maximise refusal accuracy minus false refusals with false refusals <= "
        f"{MAX_FALSE_REFUSALS:.2f}.",
        "",
        *cal_rows,
        "",
    ]
    if args.calibrate_only:
        return "\n".join(out)

    subset = [c for c in cases if c.line % args.llm_every == 0]
    metric_rows: list[str] = []
    reason_rows: list[str] = []
    trap_rows = ["| backend | handled as expected | prompts rendered |", "| --- | --- | --- |"]
    trap_misses: list[str] = []
    speed_rows: list[str] = []
    for name in args.backend:
        backend = Counting(get_backend(settings.model_copy(update={"llm_backend": name})))
        runs = {"all": cases} if name != "llamacpp" else {}
        runs[f"1 in {args.llm_every}"] = subset
        for label, chosen in runs.items():
            outs = []
            for i, case in enumerate(chosen, 1):
                d = fold.get(case.corpus, Decision(0.0))
                held = judging.model_copy(update={"score_gate": d.gate, "refusal_rule": "gate"})
                if args.rule == "learned":  # the shipped model (fitted on the tuning split)
                    held = judging.model_copy(update={"refusal_rule": "learned"})
                outs.append(answer(case, backend, held))
                if name == "llamacpp" and i % 10 == 0:
                    print(f"  {name}: {i}/{len(chosen)}", file=sys.stderr, flush=True)
            for lang in ("all", "en", "zh"):
                part = [o for o in outs if lang == "all" or o.case.q["lang"] == lang]
                metric_rows.append(metric_row(f"{name}, {label}, {lang}", part))
            reason_rows.append(reasons_row(f"{name}, {label}", outs))
        row, misses = traps(names[0], backend, settings)
        trap_rows.append(row)
        trap_misses += [f"{name}: {m}" for m in misses]
        if name == "llamacpp":
            speed_rows = speed(backend.inner, cases, settings)
    stand_rows = []
    for lang in ("all", "en", "zh"):
        part = [o for o in stand_in(cases) if lang == "all" or o.case.q["lang"] == lang]
        stand_rows.append(metric_row(f"stand-in (top 3, never refuses), {lang}", part))
    history_rows = (
        who_when.run(Counting(get_backend(settings)), settings, retrieve)
        if not args.skip_history
        else ["(skipped: --skip-history)"]
    )
    out += [
        "### Answers (held-out decision per corpus)",
        "",
        "Goals: citation precision >= 0.90, refusal accuracy >= 0.90, false refusals <= 0.10.",
        "",
        *METRIC_HEAD,
        *metric_rows,
        *stand_rows,
        "",
        "### Who/when questions over a scripted git history (questions/history.jsonl)",
        "",
        *history_rows,
        "",
        "### How answers ended (reason counts)",
        "",
        "| backend, questions | absent questions | answerable questions |",
        "| --- | --- | --- |",
        *reason_rows,
        "",
        f"### Unsafe and vague questions (questions/traps.jsonl, against {names[0]})",
        "",
        *trap_rows,
        *(f"- miss: {m}" for m in trap_misses),
        "",
    ]
    if speed_rows:
        out += [
            f"### llama.cpp speed (~{SPEED_PROMPT_TOKENS}-token prompts, "
            f"{settings.llm_threads or os.cpu_count()} threads, goal: first token <= 3 s)",
            "",
            f"Load average when done: {' / '.join(f'{x:.1f}' for x in os.getloadavg())} "
            f"(1/5/15 min; {os.cpu_count()} cores, "
            f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}).",
            "",
            *speed_rows,
            "",
        ]
    return "\n".join(out)


def main() -> int:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--corpus", action="append", help="only these corpora")
    ap.add_argument(
        "--backend",
        action="append",
        choices=["extractive", "llamacpp", "hf", "openai"],
        help="answer backends (default: extractive and llamacpp)",
    )
    ap.add_argument("--llm-every", type=int, default=3, help="llamacpp: every n-th question")
    ap.add_argument("--fresh", action="store_true", help="re-index the corpora")
    ap.add_argument("--skip-history", action="store_true", help="leave out the who/when questions")
    ap.add_argument(
        "--reuse-hits", action="store_true", help="answer from the hits saved by the last run"
    )
    ap.add_argument(
        "--split",
        choices=["tune", "tune2", "test", "test2", "all"],
        default="tune",
        help="corpora of bench/corpora.json by split; the decision is fitted on tune only",
    )
    ap.add_argument(
        "--rule",
        choices=("learned", "gate"),
        default="learned",
        help="refusal rule: the shipped learned model (in sample on the tuning split: see "
        "coderag_training.fit.refusal and refusal.card.json for its held-out figures), or the "
        "cosine gate fitted per fold",
    )
    ap.add_argument("--calibrate-only", action="store_true", help="only the score-gate table")
    ap.add_argument(
        "--lexical",
        action="store_true",
        help="as /ask before any vector is written: vector routes left out, said missing",
    )
    ap.add_argument("--out", default=str(HERE / "results" / "answers.md"))
    args = ap.parse_args()
    args.backend = args.backend or ["extractive", "llamacpp"]
    text = run(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n", "utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
