"""The encoder fine-tune of issue 31 (lever 2): LoRA adapters on the packaged MiniLM learn to
send each question to its unit over its siblings, and the saved, merged directory loads in the
embedder's ``Encoder`` with the vectors the adapted model computed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from coderag_embedder.encoder import Encoder
from coderag_training import encoder as enc
from coderag_training.reranker import Question

pytestmark = pytest.mark.slow

UNITS = {
    "parse_date": "def parse_date(s):\n    year, month, day = s.split('-')\n"
    "    return Date(int(year), int(month), int(day))\n",
    "format_date": "def format_date(d):\n    return f'{d.year:04d}-{d.month:02d}-{d.day:02d}'\n",
    "load_dates": "def load_dates(path):\n    with open(path) as f:\n"
    "        return [parse_date(line.strip()) for line in f]\n",
    "retry": "def retry(fn, times=3):\n    for _ in range(times):\n        try:\n"
    "            return fn()\n        except IOError:\n            pass\n",
}
"""A function, its inverse, its caller and an unrelated unit."""

QUESTIONS = {
    "turn text into a date value": "parse_date",
    "render a date as text": "format_date",
    "read every date stored in a file": "load_dates",
    "call again when it fails": "retry",
}


def _record(name: str, gold: str) -> dict:
    start = 10 * list(UNITS).index(name) + 1
    return {
        "file": "dates.py",
        "start": start,
        "end": start + 5,
        "kind": "function",
        "language": "python",
        "symbol": name,
        "doc": "",
        "text": UNITS[name],
        "label": int(name == gold),
    }


def _questions() -> list[Question]:
    out = []
    for i, (query, gold) in enumerate(QUESTIONS.items()):
        # the gold unit last: the search ranked its siblings above it
        names = sorted(UNITS, key=lambda n: n == gold)
        cands = [_record(n, gold) for n in names]
        out.append(Question(str(i), "c", "tune", "en", "lookup", query, query, cands, [], []))
    return out


def _train(model: enc.Model, questions: list[Question], steps: int) -> dict:
    """Train on the four questions (each against the other three units), evaluating R@1 at the
    start and the end."""
    return enc.train(
        model,
        enc.examples(questions),
        steps=steps,
        lr=3e-3,
        batch_size=4,
        hard=3,
        easy=0,
        evaluate=lambda m: {"r1": enc.r_at_1(enc.list_ranks(m, questions))},
        every=steps,
    )


def test_adapters_learn_the_questions_and_merge_into_a_loadable_encoder(tmp_path: Path) -> None:
    questions = _questions()
    data = enc.examples(questions)
    assert len(data) == 4 and all(len(e.hard) == 3 for e in data)
    model = enc.load(rank=8)
    trained = sum(p.numel() for p in model.model.parameters() if p.requires_grad)
    assert 0 < trained < 2_000_000  # only the adapters train
    record = _train(model, questions, steps=25)
    first, last = record["evaluations"][0], record["evaluations"][-1]
    assert sum(record["loss_last"]) / 10 < 0.2 * sum(record["loss_first"]) / 10, record
    assert last["r1"] == 1.0 and last["r1"] >= first["r1"], record["evaluations"]

    texts = [enc.passage(c) for c in questions[0].candidates] + list(QUESTIONS)
    import torch

    with torch.inference_mode():
        adapted = np.vstack(
            [
                model.embed(texts[:4], enc.MAX_TOKENS).numpy(),
                model.embed(texts[4:], enc.QUERY_TOKENS).numpy(),
            ]
        )
    target = enc.save(model, tmp_path / "run", {"steps": 25})
    assert (tmp_path / "run" / "adapter" / "adapter_config.json").is_file()
    served = Encoder(target, max_length=enc.MAX_TOKENS, device="cpu")
    assert np.allclose(served.encode(texts), adapted, atol=1e-4)


def test_e5_adapters_learn_and_the_embedder_serves_the_directory_as_vector2(
    tmp_path: Path,
) -> None:
    from coderag.settings import Settings
    from coderag_embedder.encoder import get_encoders

    questions = _questions()
    model = enc.load_e5(tmp_path, rank=8)
    assert (model.query_prefix, model.passage_prefix) == ("query: ", "passage: ")
    record = _train(model, questions, steps=20)
    assert sum(record["loss_last"]) / 10 < 0.5 * sum(record["loss_first"]) / 10, record
    assert record["evaluations"][-1]["r1"] == 1.0, record["evaluations"]

    units = [enc.passage(c) for c in questions[0].candidates]
    import torch

    with torch.inference_mode():
        adapted_units = model.passages(units).numpy()
        adapted_queries = model.queries(list(QUESTIONS)).numpy()
    target = enc.save(model, tmp_path / "run", {"steps": 20})
    settings = Settings(
        embed_model_2=str(target), e5_max_tokens=enc.MAX_TOKENS, embed_precision="fp32"
    )
    served = get_encoders(settings)["vector2"]
    packaged = get_encoders(Settings(e5_max_tokens=enc.MAX_TOKENS, embed_precision="fp32"))
    # the fine-tuned vectors are cached apart from the packaged model's
    assert served.name != packaged["vector2"].name and served.name.startswith("e5-")
    assert np.allclose(served.encode(units), adapted_units, atol=1e-4)
    assert np.allclose(served.encode_query(list(QUESTIONS)), adapted_queries, atol=1e-4)


def test_a_run_stopped_by_its_budget_resumes_to_the_unbroken_runs_adapters(
    tmp_path: Path,
) -> None:
    import torch

    questions = _questions()
    data = enc.examples(questions)

    def run(state: Path | None, budget_s: float | None) -> tuple[enc.Model, dict]:
        torch.manual_seed(7)  # the same fresh adapters for every model of the test
        model = enc.load(rank=8)
        record = enc.train(
            model,
            data,
            steps=6,
            lr=3e-3,
            batch_size=4,
            hard=3,
            easy=0,
            evaluate=lambda m: {"r1": enc.r_at_1(enc.list_ranks(m, questions))},
            every=2,
            state=state,
            budget_s=budget_s,
        )
        return model, record

    unbroken, whole = run(None, None)
    state = tmp_path / "state.pt"
    _, stopped = run(state, 0.0)  # out of time at the first evaluation
    assert stopped["complete"] is False and stopped["best_step"] is None
    assert [e["step"] for e in stopped["evaluations"]] == [0, 2] and state.is_file()
    resumed, finished = run(state, None)
    assert finished["complete"] is True
    assert [e["step"] for e in finished["evaluations"]] == [0, 2, 4, 6]
    assert [e["r1"] for e in finished["evaluations"]] == [e["r1"] for e in whole["evaluations"]]
    assert finished["best_step"] == whole["best_step"]
    assert finished["loss_first"] == whole["loss_first"][: len(finished["loss_first"])]
    trained = dict(unbroken.model.named_parameters())
    for name, p in resumed.model.named_parameters():
        if p.requires_grad:
            assert torch.allclose(p, trained[name], atol=1e-6), name
    with pytest.raises(ValueError, match="not 8"):
        enc.train(enc.load(rank=8), data, steps=8, lr=3e-3, state=state)
