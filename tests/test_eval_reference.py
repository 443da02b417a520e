"""``coderag eval``'s reference figures: the shipped file loads, render prints it beside the
repository's figures, and a missing or malformed file is said or refused plainly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coderag.schemas import Unit
from coderag_retriever.selfcheck import Question
from coderag_retriever.selfscore import (
    REFERENCE_FILE,
    BadReference,
    Report,
    load_reference,
    reading,
    render,
)


def _spread(median: float, low: float, high: float) -> dict[str, float]:
    return {"median": median, "min": low, "max": high}


def _reference() -> dict[str, Any]:
    doc = {
        "code_bases": 9,
        "names": ["click", "requests"],
        "coderag": {
            "r_at_1": _spread(0.27, 0.07, 0.88),
            "r_at_5": _spread(0.54, 0.28, 0.95),
            "mrr_at_10": _spread(0.4, 0.16, 0.92),
        },
        "bm25": {
            "r_at_1": _spread(0.1, 0.03, 0.37),
            "r_at_5": _spread(0.26, 0.1, 0.78),
            "mrr_at_10": _spread(0.18, 0.11, 0.53),
        },
    }
    return {"kinds": {"doc": doc, "commit": {"code_bases": 0, "note": "no history"}}}


def _report() -> Report:
    questions = [
        Question("doc", "Compute the retry delay of the client.", [0]),
        Question("doc", "Read the configuration file into sections.", [1]),
        Question("commit", "Exponential backoff for the retry delay", [0]),
    ]
    ranks: dict[str, list[int | None]] = {"coderag": [1, 7, 2], "bm25": [None, None, 1]}
    units = [
        Unit(
            repo="team",
            file=f"{name}.py",
            start_line=1,
            end_line=2,
            symbol=name,
            kind="function",
            language="python",
            text=f"def {name}():\n    pass",
        )
        for name in ("delay", "sections")
    ]
    return Report("team", questions, ranks, units)


def test_render_prints_the_reference_and_reads_the_figure_against_it() -> None:
    text = render(_report(), _reference())
    table_end = text.index("all ")
    line = (
        "doc: on 9 pinned code bases of coderag's benchmark the same doc questions give "
        "R@5 median 0.54 (0.28–0.95); BM25 0.26"
    )
    assert line in text and text.index(line) > table_end
    # doc R@5 here is 0.5: inside 0.28–0.95, under the median 0.54
    assert "doc: this repository's coderag R@5 0.50 is within the range" in text
    assert "commit: no pinned reference" in text and "BM25's on the same questions" in text
    assert "no reference shipped" not in text


def test_render_without_a_reference_says_none_shipped() -> None:
    text = render(_report())
    assert "no reference shipped" in text and "pinned code bases" not in text
    assert render(Report("empty", [])).endswith("no usable commit messages")


def test_reading_places_a_figure() -> None:
    spread = _spread(0.5, 0.3, 0.9)
    assert reading(0.2, spread) == "below the range"
    assert reading(0.95, spread) == "above the range"
    assert reading(0.6, spread).startswith("within the range")


def test_json_carries_the_reference() -> None:
    ref = _reference()
    assert _report().to_json(ref)["reference"] == ref
    assert _report().to_json()["reference"] is None


def test_load_reference_missing_malformed_and_shipped(tmp_path: Path) -> None:
    assert load_reference(tmp_path / "absent.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(BadReference, match="malformed self-check reference"):
        load_reference(bad)
    broken = _reference()
    del broken["kinds"]["doc"]["coderag"]["r_at_5"]["max"]
    bad.write_text(json.dumps(broken))
    with pytest.raises(BadReference, match=r"kinds\.doc\.coderag\.r_at_5"):
        load_reference(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_reference()))
    assert load_reference(good) == _reference()
    if REFERENCE_FILE.is_file():  # the shipped one, when bench/selfcheck_reference.py wrote it
        shipped = load_reference()
        assert shipped is not None and shipped["kinds"]["doc"]["code_bases"] >= 1
        assert shipped["kinds"]["commit"]["code_bases"] == 0
