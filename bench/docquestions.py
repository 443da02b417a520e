"""Training questions made automatically from a code base's own doc comments.

For every documented function, method or class, the first sentence of its doc comment becomes a
question and the definition becomes the answer; the copy of the code base that is indexed has
every doc comment blanked (line numbers kept), so the question cannot be answered by matching
its own words: the ranker learns from the code, as it must for a colleague's question. The
first-sentence rule is the product's (``coderag_retriever.selfcheck``, used by ``coderag eval``).

    python -m bench.docquestions NAME ...   # writes bench/.cache/src/NAME-nodoc/ and
                                            # bench/.cache/docquestions/NAME.jsonl

Only tuning-split corpora may be used: the questions train the learned ranker.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

from bench.fetch import corpus_root, load_corpora  # noqa: E402
from coderag_retriever.selfcheck import first_sentence  # noqa: E402

OUT = HERE / ".cache" / "docquestions"
"""Where the generated question files go."""

_GO_FUNC = re.compile(r"^func\s+(\([^)]*\)\s*)?([A-Za-z_]\w*)|^type\s+([A-Za-z_]\w*)")


def python_file(source: str, rel: str) -> tuple[str, list[dict]]:
    """Blank every docstring (keeping line numbers); questions from those of definitions."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, []
    lines = source.splitlines(keepends=True)
    questions = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        body = node.body
        if not (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            continue
        doc = body[0]
        sentence = first_sentence(doc.value.value)
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if sentence:
            questions.append(
                {"query": sentence, "file": rel, "start": start, "end": node.end_lineno}
            )
        # The docstring's lines become one empty string literal padded to the same line count.
        first, last = doc.lineno - 1, doc.end_lineno - 1
        indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
        lines[first] = indent + '""\n'
        for i in range(first + 1, last + 1):
            lines[i] = "\n"
    return "".join(lines), questions


def go_file(source: str, rel: str) -> tuple[str, list[dict]]:
    """Blank the ``//`` comment block above each func and type; questions from them."""
    lines = source.splitlines(keepends=True)
    questions = []
    for i, line in enumerate(lines):
        m = _GO_FUNC.match(line)
        if not m:
            continue
        j = i
        while j > 0 and lines[j - 1].lstrip().startswith("//"):
            j -= 1
        if j == i:
            continue
        doc = " ".join(lines[k].strip().lstrip("/").strip() for k in range(j, i))
        end = _go_end(lines, i)
        sentence = first_sentence(doc)
        if sentence and end:
            questions.append({"query": sentence, "file": rel, "start": i + 1, "end": end})
        for k in range(j, i):
            lines[k] = "\n"
    return "".join(lines), questions


def _go_end(lines: list[str], start: int) -> int | None:
    """1-based last line of the braced definition starting at ``start`` (0-based)."""
    depth, opened = 0, False
    for k in range(start, len(lines)):
        depth += lines[k].count("{") - lines[k].count("}")
        opened = opened or "{" in lines[k]
        if opened and depth <= 0:
            return k + 1
    return start + 1 if not opened else None


def build(name: str) -> tuple[Path, int]:
    """Write the doc-blanked copy of a corpus and its questions; (copy root, question count)."""
    src = corpus_root(name)
    dest = src.parent / f"{name}-nodoc"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, symlinks=True)
    questions: list[dict] = []
    for path in sorted(dest.rglob("*")):
        if not path.is_file() or path.is_symlink() or "test" in path.name.lower():
            continue
        rel = path.relative_to(dest).as_posix()
        handler = {".py": python_file, ".go": go_file}.get(path.suffix)
        if handler is None:
            continue
        text, found = handler(path.read_text("utf-8", errors="replace"), rel)
        path.write_text(text, "utf-8")
        questions += found
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / f"{name}.jsonl").open("w", encoding="utf-8") as f:
        for i, q in enumerate(questions, 1):
            f.write(
                json.dumps(
                    {
                        "id": f"{name}-doc-{i:04d}",
                        "lang": "en",
                        "type": "descriptive",
                        "query": q["query"],
                        "gold": [
                            {"file": q["file"], "start_line": q["start"], "end_line": q["end"]}
                        ],
                    }
                )
                + "\n"
            )
    return dest, len(questions)


def main() -> int:
    """Build the doc-blanked copies and questions of the named tuning corpora."""
    corpora = {c["name"]: c for c in load_corpora()}
    for name in sys.argv[1:]:
        if corpora[name].get("split", "tune") != "tune":
            raise SystemExit(f"{name} is in the test split: it must never train the ranker")
        root, n = build(name)
        print(f"{name}: {n} questions, code without docs at {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
