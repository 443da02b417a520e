"""The learned refusal rule is fitted on the tuning corpora and on the written training questions
(issue 41: the rule fitted on 461 tuning questions read long descriptive questions as absent),
each question retrieved by a ranker that never saw its code base, and never on a frozen split."""

from __future__ import annotations

from pathlib import Path

from coderag import fitted
from coderag_retriever import relevance
from coderag_training import pins
from coderag_training.fit import refusal
from coderag_training.fit.ranker import fold_ranker, home_fold


def _tuning() -> list[str]:
    return [c["name"] for c in pins.load_corpora() if c["split"] in ("tune", "tune2")]


def _written_training() -> list[str]:
    return sorted(
        e["name"]
        for e in pins.load_mining()
        if (pins.QUESTIONS / "written" / f"{e['name']}.jsonl").is_file()
    )


def _frozen() -> set[str]:
    names = {c["name"] for c in pins.load_corpora() if c["split"] in ("test", "test2")}
    for path in pins.written_files():
        names |= {e["name"] for e in pins.load_corpora(path) if e.get("split") == "wtest"}
    return names


def test_each_code_base_is_retrieved_by_a_ranker_that_never_saw_it(tmp_path: Path) -> None:
    """A tuning corpus has a ranker fitted without it; a written code base the ranker of the
    fold its name hashes to, fitted without that fold."""
    split = {"requests": "tune", "httpx": "tune2"}
    assert fold_ranker(tmp_path, "requests", split) == tmp_path / "ranker-without-requests.json"
    assert fold_ranker(tmp_path, "httpx", split).name == "ranker-without-httpx.json"
    fold = home_fold("ws")
    assert fold_ranker(tmp_path, "ws", split).name == f"ranker-without-fold-{fold}.json"
    assert home_fold("ws") == fold  # a name's fold does not change between runs


def test_the_trainer_reads_a_written_code_base_once_its_hits_are_saved(tmp_path: Path) -> None:
    tuning = _tuning()
    assert refusal.code_bases(tmp_path, tuning_only=False) == tuning
    written = _written_training()[:2]
    for name in written:
        (tmp_path / f"{name}.json").write_text("[]", "utf-8")
    assert refusal.code_bases(tmp_path, tuning_only=False) == tuning + written
    assert refusal.code_bases(tmp_path, tuning_only=True) == tuning
    assert refusal.question_file(tuning[0]) == pins.QUESTIONS / f"{tuning[0]}.jsonl"
    assert refusal.question_file(written[0]).parent == pins.QUESTIONS / "written"


def test_the_shipped_rule_learned_from_written_questions_and_no_frozen_split() -> None:
    """The card of ``refusal.json`` names the code bases it was fitted on: every tuning corpus,
    at least fifty written training code bases, none of test, test2 or wtest."""
    card = fitted.verify(relevance.MODEL_FILE)
    fitted_on = set(card.code_bases)
    assert not fitted_on & _frozen()
    assert set(_tuning()) <= fitted_on
    assert len(fitted_on & set(_written_training())) >= 50
    assert card.questions["absent"] >= 200 and card.questions["answerable"] >= 1200
    shipped = relevance._load(str(relevance.MODEL_FILE))
    assert shipped is not None and shipped.zh_words
