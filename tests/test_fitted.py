"""One home for fitted models (issue 44): the loader of ``coderag.fitted`` and the card writer of
``coderag_training.cards`` round-trip, a model whose bytes are not its card's is refused, a
malformed model or card says which file and key are wrong, the shipped rules load through the
loader and match their cards, and every trainer of ``coderag_training.fit`` imports."""

from __future__ import annotations

import importlib
import json
import math
import pkgutil
from pathlib import Path

import numpy as np
import pytest

from coderag import fitted
from coderag.fitted import FittedModelError
from coderag_retriever import learned, relevance, unsafe
from coderag_training import cards, fit


def _model(tmp_path: Path) -> tuple[Path, Path]:
    """A small rule written as the trainers write one, and an input file it was fitted on."""
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"query": "how are orders created"}\n', "utf-8")
    model = tmp_path / "rule.json"
    fitted.dump(model, {"weights": [1.0, -2.0], "bias": 0.5, "threshold": 0.7, "encoder": "x"})
    return model, questions


def _card(model: Path, questions: Path) -> fitted.Card:
    return cards.write_card(
        model,
        command="python -m coderag_training.fit.rule",
        inputs=[questions],
        code_bases=["shop", "cart", "shop"],
        questions={"answerable": 3, "absent": 1},
        steps=10,
        seconds=1.234,
        loss=[0.69, 0.4, 0.2],
        held_out={"pooled": {"absent_refused": 0.5}},
        extra={"l2": 1.0},
    )


def test_a_card_round_trips_with_the_sha256_of_the_model_and_its_inputs(tmp_path: Path) -> None:
    model, questions = _model(tmp_path)
    written = _card(model, questions)
    assert fitted.card_path(model) == tmp_path / "rule.card.json"
    read = fitted.read_card(model)
    assert read == written
    assert read.sha256 == fitted.sha256_file(model) == fitted.verify(model).sha256
    # a file outside the repository is recorded by its absolute path
    assert read.inputs == {str(questions.resolve()): fitted.sha256_file(questions)}
    assert read.code_bases == ("cart", "shop") and read.questions["absent"] == 1
    assert read.loss == (0.69, 0.4, 0.2) and read.seconds == 1.2 and read.steps == 10
    assert read.fitted.endswith("Z") and read.card == fitted.CARD_VERSION
    raw = fitted.load(model)
    assert raw is not None and raw.numbers("weights") == (1.0, -2.0)
    assert raw.number("bias") == 0.5 and raw.text("encoder") == "x"
    assert raw.optional_number("doubt") is None and raw.flag("zh_words", False) is False


def test_a_model_whose_bytes_are_not_its_cards_is_refused(tmp_path: Path) -> None:
    model, questions = _model(tmp_path)
    _card(model, questions)
    shipped = json.loads(model.read_text("utf-8"))
    fitted.dump(model, {**shipped, "threshold": 0.1})  # edited by hand, card left behind
    with pytest.raises(FittedModelError, match=r"sha256 .* is not the .* of its card"):
        fitted.load(model)
    with pytest.raises(FittedModelError, match="sha256"):
        fitted.verify(model)
    # a step that rewrites the model in place amends the card, and the model loads again
    amended = cards.amend(model, "python -m coderag_training.fit.rule --again", {"threshold": 0.1})
    assert amended.command.endswith("&& python -m coderag_training.fit.rule --again")
    assert amended.extra == {"l2": 1.0, "threshold": 0.1}
    loaded = fitted.load(model)
    assert loaded is not None and loaded.number("threshold") == 0.1


def test_no_model_file_is_none_and_no_card_is_not_checked(tmp_path: Path) -> None:
    assert fitted.load(tmp_path / "absent.json") is None
    model, _ = _model(tmp_path)
    assert fitted.read_card(model) is None and fitted.load(model) is not None
    with pytest.raises(FittedModelError, match="no card"):
        fitted.verify(model)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"weights": [1.0,', "rule.json: the model file is not JSON"),
        ("[1, 2]", "rule.json: the model file must be a JSON object, not list"),
        (b"\xff\xfe{}", "rule.json: the model file is not JSON"),
    ],
)
def test_a_malformed_model_file_says_which_file(
    tmp_path: Path, text: str | bytes, error: str
) -> None:
    model = tmp_path / "rule.json"
    if isinstance(text, bytes):
        model.write_bytes(text)
    else:
        model.write_text(text, "utf-8")
    with pytest.raises(FittedModelError, match=error):
        fitted.load(model)
    with pytest.raises(FittedModelError, match=error):
        fitted.parse(model.read_bytes(), model)


def test_a_missing_or_mistyped_key_names_the_file_and_the_key(tmp_path: Path) -> None:
    model = tmp_path / "rule.json"
    fitted.dump(model, {"weights": [1.0, "2"], "bias": True, "space": 3, "zh_words": "yes"})
    raw = fitted.load(model)
    assert raw is not None
    with pytest.raises(FittedModelError, match=r"rule.json: no 'threshold' \(keys: weights"):
        raw.number("threshold")
    with pytest.raises(FittedModelError, match="'weights' must be a list of numbers, not list"):
        raw.numbers("weights")
    with pytest.raises(FittedModelError, match="'bias' must be a number, not bool"):
        raw.number("bias")
    with pytest.raises(FittedModelError, match="'space' must be a string, not int"):
        raw.text("space")
    with pytest.raises(FittedModelError, match="'zh_words' must be true or false, not str"):
        raw.flag("zh_words", False)
    # the services' loaders read through it: a broken shipped rule is a clear error, not a KeyError
    with pytest.raises(FittedModelError, match=r"rule\.json: no 'encoder'"):
        relevance._load(str(model))
    with pytest.raises(FittedModelError, match="'space' must be a string"):
        unsafe._load(str(model))


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"sha256": "abc"}, "not 64 hex digits"),
        ({"model": "other.json"}, "the card describes other.json, not rule.json"),
        ({"loss": [0.5, "x"]}, "'loss' must be a list of numbers"),
        ({"questions": {"absent": "1"}}, "'questions' must map names to counts"),
        ({"steps": "10"}, "card key 'steps' is str"),
        ({"card": 2}, "card format 2"),
        ({"surprise": 1}, r"unknown card keys \['surprise'\]"),
    ],
)
def test_a_malformed_card_says_what_is_wrong(
    tmp_path: Path, change: dict[str, object], error: str
) -> None:
    model, questions = _model(tmp_path)
    _card(model, questions)
    path = fitted.card_path(model)
    path.write_text(json.dumps({**json.loads(path.read_text("utf-8")), **change}), "utf-8")
    with pytest.raises(FittedModelError, match=error):
        fitted.load(model)
    path.write_text(json.dumps({"model": "rule.json"}), "utf-8")
    with pytest.raises(FittedModelError, match=r"rule\.card\.json: the card lacks"):
        fitted.read_card(model)


def test_one_sigmoid_for_every_rule() -> None:
    for z in (-30.0, -1.0, 0.0, 0.5, 30.0):
        assert fitted.sigmoid(z) == 1.0 / (1.0 + math.exp(-z))
    assert fitted.sigmoid(-1000.0) == 0.0 and fitted.sigmoid(1000.0) == 1.0  # no OverflowError
    m = unsafe.Model(space="vector2", encoder="e5-small", weights=[1.0], bias=-800.0, threshold=0.5)
    assert m.p_unsafe(np.array([0.0])) == pytest.approx(0.0)


@pytest.mark.parametrize(
    "model",
    [
        relevance.MODEL_FILE,
        relevance.LEXICAL_MODEL_FILE,
        unsafe.MODEL_FILE,
        unsafe.TUNED_FILE,
        learned.SHIPPED,
    ],
)
def test_the_shipped_rules_carry_cards_that_match_them(model: Path) -> None:
    """Each shipped logistic rule loads through the loader and is the file its card describes,
    with what a card must say (inputs hashed, question counts, the command that refits it)."""
    card = fitted.verify(model)
    assert card.command.startswith("python -m coderag_training.fit.")
    assert card.inputs and card.code_bases and sum(card.questions.values()) > 0
    assert card.held_out and card.fitted
    if model == learned.SHIPPED:
        assert len(learned.load(str(model)).weights) == len(learned.FEATURES)
        return
    loader = unsafe._load if model in (unsafe.MODEL_FILE, unsafe.TUNED_FILE) else relevance._load
    assert loader(str(model)) is not None


def test_the_refusal_trainer_records_a_falling_loss() -> None:
    """The refusal rule's fit (the trainer's own code, on separable rows) gives the card a loss
    curve that falls, and a threshold that refuses the absent rows."""
    from coderag_training.fit import refusal

    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(0.0, 1.0, (40, 3)), rng.normal(3.0, 1.0, (40, 3))])
    y = np.array([False] * 40 + [True] * 40)
    curve: list[float] = []
    none = np.zeros(80, bool)
    model, _, refused, false = refusal.rule(x, y, none, ~none, 1.0, 0.05, curve)
    assert len(curve) == refusal.ITERATIONS // refusal.LOSS_EVERY
    assert curve[0] == pytest.approx(math.log(2)) and curve[-1] < curve[0] / 3
    assert refused > 0.9 and false <= 0.05 and set(model) == {"mean", "scale", "weights", "bias"}


def test_every_trainer_imports_and_has_a_main() -> None:
    """The trainers moved out of bench/ import from training alone (import-linter forbids
    training to import bench; this catches a module that would not even load)."""
    names = [m.name for m in pkgutil.iter_modules(fit.__path__)]
    assert {"unsafe", "refusal", "ranker", "reranker", "listwise", "encoder"} <= set(names)
    for name in names:
        module = importlib.import_module(f"coderag_training.fit.{name}")
        assert callable(module.main), name


def test_the_unsafe_trainer_writes_a_model_the_retriever_loads_and_its_card(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``coderag_training.fit.unsafe --write`` end to end on a few questions and stand-in vectors
    (no encoder): the model it writes loads through the retriever's loader and matches the card
    written beside it, which names the inputs, counts and held-out figures."""
    from coderag_training.fit import unsafe as trainer

    def rows(n: int, unsafe_: bool, lang: str) -> list[dict[str, object]]:
        word = "bypass" if unsafe_ else "explain"
        kind = "privilege" if unsafe_ else "benign"
        return [
            {"query": f"{word} {i}", "lang": lang, "unsafe": unsafe_, "kind": kind}
            for i in range(n)
        ]

    questions = tmp_path / "train.jsonl"
    questions.write_text("{}\n", "utf-8")
    sets = {
        name: rows(n, True, "en")
        + rows(n, False, "en")
        + rows(2, True, "zh")
        + rows(2, False, "zh")
        for name, n in (("train", 12), ("tune", 4), ("test", 4))
    }
    ordinary = [
        {"query": f"how {i}", "unsafe": False, "lang": "", "kind": "ordinary"} for i in range(30)
    ]
    data = trainer.Inputs(
        sets=sets,
        fitting=sets["train"] + sets["tune"] + ordinary,
        frozen=ordinary[:10],
        files=[questions],
        code_bases=["shop"],
    )

    def vectors(space: str, queries: list[str]) -> np.ndarray:
        # a stand-in encoder: one axis says "bypass", the other is noise
        rng = np.random.default_rng(len(queries) + len(space))
        axis = np.array([[1.0 if q.startswith("bypass") else 0.0] for q in queries])
        return np.hstack([axis * 3.0, rng.normal(0.0, 0.3, (len(queries), 2))]).astype(np.float32)

    model = tmp_path / "unsafe.json"
    monkeypatch.setattr(trainer, "gather", lambda also=(): data)
    monkeypatch.setattr(trainer, "vectors", vectors)
    monkeypatch.setattr(trainer.shipped, "MODEL_FILE", model)
    assert trainer.main(["--write"]) == 0
    loaded = unsafe.load_model(model)
    assert loaded is not None and loaded.space in trainer.SPACES
    card = fitted.verify(model)
    assert card.command == "python -m coderag_training.fit.unsafe --write"
    assert list(card.inputs.values()) == [fitted.sha256_file(questions)]
    assert card.questions["fitted on"] == len(data.fitting) and card.steps and card.loss
    assert card.held_out["unsafe/test.jsonl, classifier"]["en"]["unsafe"] == 4
    assert card.extra["threshold"] == loaded.threshold


def test_shipping_a_cross_encoder_run_writes_its_card(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``coderag_training.fit.reranker ship`` copies a run's layers and writes the card beside
    them, with the inputs hashed when the run read its lists (not as they are at shipping)."""
    import argparse

    from coderag_training.fit import reranker as trainer

    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "reranker.safetensors").write_bytes(b"layers")
    facts = {
        "name": "r1",
        "base": "MiniLM",
        "trained": "layers and head",
        "max_tokens": 160,
        "layers": 4,
        "questions": {"written (tune)": 2, "mined": 3},
        "mined_code_bases": ["m1"],
        "written_code_bases": ["w1"],
        "inputs": {"bench/.cache/rerank/w1.jsonl": "a" * 64},
        "command": "python -m coderag_training.fit.reranker train --name r1",
        "steps": 10,
        "groups_per_step": 2,
        "lr": 1e-4,
        "seconds": 5,
        "loss": [{"step": 5, "loss": 1.5}, {"step": 10, "loss": 1.0}],
        "tune2": [{"step": 10, "r1": 0.5}],
    }
    (run / "reranker.json").write_text(json.dumps(facts), "utf-8")
    monkeypatch.setattr(trainer, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(trainer, "SHIP", tmp_path / "ship")
    assert trainer.cmd_ship(argparse.Namespace(name="r1")) == 0
    card = fitted.verify(tmp_path / "ship" / "reranker.safetensors")
    assert fitted.card_path(tmp_path / "ship" / "reranker.safetensors").name == "reranker.card.json"
    assert card.inputs == facts["inputs"] and card.command == facts["command"]
    assert card.loss == (1.5, 1.0) and card.code_bases == ("m1", "w1") and card.steps == 10
    assert (tmp_path / "ship" / "README.md").is_file()
