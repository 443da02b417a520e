"""The written questions' candidate lists (issue 44) split as training reads them: ``wtune`` is
one fold of the written training code bases and never trained on, ``wtrain`` the others, and
the frozen ``wtest`` is refused to the encoder's trainer and tuning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coderag_training.fit import encoder as fit_encoder
from coderag_training.fit import reranker as hand
from coderag_training.fit.ranker import home_fold


def _question(corpus: str, split: str, n: int) -> dict:
    gold = {"file": "a.py", "start": 1, "end": 9, "symbol": "f", "kind": "function", "label": 1}
    return {
        "id": f"{corpus}-{n}",
        "corpus": corpus,
        "split": split,
        "lang": "en",
        "type": "lookup",
        "query": f"where is thing {n} of {corpus}",
        "candidates": [gold],
        "golds": [gold],
    }


@pytest.fixture
def lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """Written lists for code bases on both sides of the tuning fold, and a frozen one."""
    names = [f"cb{i}" for i in range(40)]
    tuning = {n for n in names if home_fold(n) == hand.WTUNE_FOLD}
    assert tuning and tuning != set(names), "the names fall on both sides of the fold"
    written = tmp_path / "written"
    written.mkdir()
    for name in names:
        rows = [_question(name, "wtrain", n) for n in range(2)]
        (written / f"{name}.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")
    frozen = [_question("frozen_cb", "wtest", n) for n in range(3)]
    (written / "frozen_cb.jsonl").write_text("\n".join(map(json.dumps, frozen)) + "\n")
    (tmp_path / "tune_cb.jsonl").write_text(json.dumps(_question("tune_cb", "tune", 0)) + "\n")
    (tmp_path / "test_cb.jsonl").write_text(json.dumps(_question("test_cb", "test", 0)) + "\n")
    monkeypatch.setattr(hand, "LISTS", tmp_path)
    return {"all": set(names), "tuning": tuning}


def test_wtune_is_the_tuning_fold_and_wtrain_the_rest(lists: dict[str, set[str]]) -> None:
    wtune = {q.corpus for q in hand.split_questions("wtune")}
    wtrain = {q.corpus for q in hand.split_questions("wtrain")}
    assert wtune == lists["tuning"]
    assert wtrain == lists["all"] - lists["tuning"]
    assert {q.corpus for q in hand.split_questions("wtest")} == {"frozen_cb"}
    assert {q.corpus for q in hand.split_questions("tune")} == {"tune_cb"}


def test_the_encoder_trainer_never_reads_a_frozen_split(lists: dict[str, set[str]]) -> None:
    for split in ("wtest", "test", "test2"):
        with pytest.raises(SystemExit, match="frozen"):
            fit_encoder.split_questions(split)
    assert {q.corpus for q in fit_encoder.split_questions("wtune")} == lists["tuning"]


def test_a_runs_card_names_only_the_files_of_its_questions(lists: dict[str, set[str]]) -> None:
    # the folder holds the frozen code bases' lists too: a card naming every file read listed
    # them as a run's inputs although no question of theirs was kept
    assert [f.name for f in hand.question_files("tune")] == ["tune_cb.jsonl"]
    names = {f.stem for f in hand.question_files("wtrain")}
    assert names == lists["all"] - lists["tuning"] and "frozen_cb" not in names
