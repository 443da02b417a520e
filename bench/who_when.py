"""Who/when questions (X7) over the scripted shop history (``git_history.py``): each question of
``questions/history.jsonl`` names the commit(s) its answer must name, or none (the answer must
then say that no commit in the window changed the code). Run by ``answers.py``; "now" is
``git_history.NOW``. The history comes from the parser's ``history`` module, the same code the
parser's ``/repos/{name}/history`` route runs."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.git_history import NOW, build
from coderag.errors import NotFound
from coderag.history import HistoryResponse, RangeHistory
from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.schemas import RetrieveResponse
from coderag.settings import Settings
from coderag.store import get_catalog
from coderag_app.server import load_jobs
from coderag_generator import chronicle, window
from coderag_generator.answer import Done, Question, answer_events
from coderag_generator.backends import Backend
from coderag_parser import line_history
from coderag_parser.gitsync import head_commit

HERE = Path(__file__).resolve().parent
REPO = "shop-history"
"""The name the scripted repository is indexed under."""

_HASH = re.compile(r"`([0-9a-f]{7})`")


def git_facts(root: Path, query: str, hits: list[dict[str, Any]]) -> chronicle.GitFacts:
    """What ``/ask`` fetches from the parser for a who/when question, read in-process."""
    units = chronicle.targets(query, hits)
    win = window.window(query, NOW)
    since, until = (win.since, win.until) if win else (None, None)
    ranges = [
        RangeHistory(
            **r.model_dump(),
            last=line_history.last_commit(root, r.file, r.start_line, r.end_line),
            changes=line_history.changes(root, r.file, r.start_line, r.end_line, since, until),
        )
        for r in chronicle.ranges(units)
    ]
    known = line_history.has_history(root)
    history = HistoryResponse(repo=REPO, has_history=known, ranges=ranges)
    return chronicle.GitFacts(units, history, win)


def run(
    backend: Backend,
    settings: Settings,
    retrieve: Callable[[str, str, Settings], list[dict[str, Any]]],
) -> list[str]:
    """Build and index the shop, ask every question; the report's rows."""
    root = HERE / ".cache" / "history-repo"
    shas = build(root)
    catalog = get_catalog()
    try:  # the build is reproducible: an index of the same head commit is still right
        fresh = catalog.get_repo(REPO).commit != head_commit(root)
    except NotFound:
        fresh = True
    if fresh:
        with contextlib.suppress(NotFound):
            catalog.delete_repo(REPO)
        catalog.create_repo(REPO, str(root), None, None)
        load_jobs()  # this process runs every stage of the chain
        run_now(IndexRepo(repo=REPO))
    path = HERE / "questions" / "history.jsonl"
    questions = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
    rows, misses = [], []
    tally: dict[str, list[int]] = {"en": [0, 0, 0], "zh": [0, 0, 0]}
    for q in questions:
        query = q["query"]
        hits = retrieve(REPO, window.subject(query), settings)
        git = git_facts(root, query, hits)
        events = answer_events(
            Question(query, git=git),
            RetrieveResponse(results=hits, took_ms=0.0),
            backend=backend,
            settings=settings,
            file_lines=lambda p: catalog.file_lines(REPO, p),
        )
        done = [e for e in events if isinstance(e, Done)][-1].payload()
        named = _HASH.findall(done["answer"])
        want = [shas[s] for s in q["commits"]]
        says_none = done["answer"].startswith("No commit") or "没有提交修改过" in done["answer"]
        listed = [] if says_none else named
        if want:
            exact = git.window is None or set(listed) == set(want)
            ok = bool(listed) and listed[0] == want[0] and exact
        else:
            ok = says_none
        t = tally[q["lang"]]
        t[0] += 1
        t[1] += ok
        t[2] += len(set(listed) - set(want)) if git.window is not None else 0
        if not ok:
            misses.append(f"- {q['id']}: wanted {want or 'none'}, named {named}: {query}")
    rows += [
        "| language | questions | answer names the right commit (or says none) | "
        "wrong commits named (windowed questions) |",
        "| --- | --- | --- | --- |",
    ]
    for lang, (n, ok, wrong) in tally.items():
        rows.append(f"| {lang} | {n} | {ok}/{n} = {ok / max(n, 1):.2f} | {wrong} |")
    return [*rows, "", *misses]
