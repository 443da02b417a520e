"""Fine-tune multilingual-e5-small to decide unsafe requests (issue 41: a model class beyond a
logistic rule on frozen vectors).

    python -m coderag_training.fit.unsafe_tuned overfit   # a few hundred rows, loss to ~0
    python -m coderag_training.fit.unsafe_tuned train --name u1 [--steps 300] [--minutes 80]

LoRA adapters on e5-small's attention and feed-forward layers and a logistic head on the
question's pooled, normalised vector (as the retriever's query embedding reads it: ``query: ``
and the first 64 tokens), trained with binary cross-entropy on the same rows as
``coderag_training.fit.unsafe`` fits (the labelled sets it ships with and the benign ordinary
questions), in batches balanced between unsafe and benign. ``train4.jsonl`` and a fifth of the
ordinary questions are held out as the tuning set: the loss is logged every ten steps and, every
``--every`` steps, the unsafe requests declined on it at the threshold that declines at most
``MAX_BENIGN`` of its benign security questions and ``MAX_ORDINARY`` of its ordinary ones; the
logistic rule fitted on the same rows is scored on the same tuning set for comparison. The
frozen sets (``test.jsonl``, ``test2.jsonl``, issue 41's ``harmless/unsafe.jsonl`` and the
harmless set) are read only with ``--report``, once, at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from coderag.settings import get_settings
from coderag_embedder import unsafe as reader
from coderag_embedder.queries import embed_queries
from coderag_retriever import unsafe as shipped
from coderag_training import cards, pins
from coderag_training.encoder import load_e5
from coderag_training.fit import unsafe as logistic

Row = dict[str, Any]

MAX_BENIGN = logistic.MAX_BENIGN
"""Most benign security questions of the tuning set the threshold may decline."""

MAX_ORDINARY = logistic.MAX_ORDINARY
"""Most ordinary questions of the tuning set the threshold may decline."""

LOGISTIC_C = 30.0
"""The regularisation the logistic rule's fit chose out of fold (its last shipped card)."""

UNSAFE_SHARE = 0.375
"""Unsafe requests in a batch: 3/8, leaving 3/8 to ordinary questions (at 1/2 and 1/4, run u2
declined 20 of 4,498 ordinary questions of every benchmark code base, the logistic rule 2)."""

RUNS = pins.ROOT / "bench" / ".cache" / "unsafe-runs"
"""Where runs keep the converted e5 base, their adapters and logs (not committed)."""

HELD_SETS = ("train4", "tune")
"""Labelled sets held out as the tuning set: ``train4`` (grounded in training code bases) and
``tune`` (written apart, as ``test`` was)."""


def split_rows(seed: int = 0, also: tuple[str, ...] = ()) -> tuple[list[Row], list[Row]]:
    """The fitting rows (the shipped rule's labelled sets, those ``also`` names, and the ordinary
    questions of four code bases in five) and the tuning rows (``HELD_SETS`` and the ordinary
    questions of the fifth code base in five, ``held_code_base``: a question of a code base the
    fit never read, as a user's is; a random fifth of the rows kept their code bases' twins in
    the fit and let the threshold decline three times more unseen ordinary questions)."""
    data = logistic.gather(also)
    tuning = [q for n in HELD_SETS for q in logistic.unsafe_set(n)]
    held = {q["id"] for q in tuning}
    fitting = [q for q in data.fitting if q["kind"] != "ordinary" and q.get("id") not in held]
    for path in [*logistic.ordinary_files(("tune", "tune2")), *logistic.written_files()]:
        rows = logistic.benign([path])
        (tuning if held_code_base(path.stem, seed) else fitting).extend(rows)
    return fitting, tuning


def held_code_base(name: str, seed: int = 0) -> bool:
    """Whether a code base's ordinary questions are tuning rows (one in five, by a stable hash)."""
    return int(hashlib.sha256(f"{seed}:{name}".encode()).hexdigest(), 16) % 5 == 0


def frozen_sets() -> dict[str, list[Row]]:
    """The held-out sets read once, for the report."""
    harmless = pins.QUESTIONS / "harmless"
    benign = [
        {"query": r["query"], "unsafe": False, "lang": r.get("lang", ""), "kind": "harmless"}
        for p in sorted(harmless.glob("h_*.jsonl"))
        for r in pins.read_jsonl(p)
    ]
    issue41 = [
        {"query": r["query"], "unsafe": True, "lang": r.get("lang", ""), "kind": "unsafe"}
        for r in pins.read_jsonl(harmless / "unsafe.jsonl")
    ]
    out = {"test": logistic.unsafe_set("test"), "issue41": issue41 + benign}
    if (logistic.UNSAFE / "test2.jsonl").is_file():
        out["test2"] = logistic.unsafe_set("test2")
    return out


def threshold(p: np.ndarray, rows: list[Row]) -> float:
    """The lowest probability within both benign budgets on these rows."""
    y = np.array([int(q["unsafe"]) for q in rows])
    plain = np.array([q["kind"] == "ordinary" for q in rows])
    return logistic.threshold(p, y, plain)


def score(p: np.ndarray, rows: list[Row], t: float) -> dict[str, float]:
    """Unsafe declined, benign security declined and ordinary declined at ``t``, per language."""
    out: dict[str, float] = {}
    for lang in ("all", "en", "zh"):
        part = [(q, s) for q, s in zip(rows, p, strict=True) if lang == "all" or q["lang"] == lang]
        for label, keep in (
            ("unsafe", lambda q: q["unsafe"]),
            ("benign", lambda q: not q["unsafe"] and q["kind"] != "ordinary"),
            ("ordinary", lambda q: q["kind"] == "ordinary"),
        ):
            got = [s >= t for q, s in part if keep(q)]
            if got:
                out[f"{lang} {label}"] = round(sum(got) / len(got), 3)
                out[f"{lang} {label} n"] = len(got)
    return out


def score_of(prefix: str, p: np.ndarray, rows: list[Row], t: float) -> dict[str, float]:
    """``score`` of the rows whose id starts with ``prefix``."""
    keep = [i for i, q in enumerate(rows) if str(q.get("id", "")).startswith(prefix)]
    return score(p[keep], [rows[i] for i in keep], t)


class Classifier:
    """e5-small with LoRA adapters and a logistic head on its pooled query vector."""

    def __init__(self, work: Path, rank: int, seed: int) -> None:
        import torch

        torch.manual_seed(seed)
        self.encoder = load_e5(work, rank=rank, alpha=2 * rank)
        self.head = torch.nn.Linear(384, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)
        self.scale = 20.0  # a normalised vector's dot products are small: let the head reach

    def parameters(self) -> list[Any]:
        """What trains: the adapters and the head."""
        lora = [p for p in self.encoder.model.parameters() if p.requires_grad]
        return [*lora, *self.head.parameters()]

    def logits(self, texts: list[str]) -> Any:
        """One logit per question (gradients flow in train mode)."""
        vec = self.encoder.queries(texts)
        return self.head(vec * self.scale).squeeze(-1)

    def probabilities(self, texts: list[str], batch: int = 64) -> np.ndarray:
        """p(unsafe) of each question, in eval mode."""
        import torch

        self.encoder.model.eval()
        out = []
        with torch.inference_mode():
            for i in range(0, len(texts), batch):
                out.append(torch.sigmoid(self.logits(texts[i : i + batch])).numpy())
        self.encoder.model.train()
        return np.concatenate(out) if out else np.zeros(0)


def balanced(rows: list[Row], size: int, rng: random.Random) -> list[Row]:
    """A batch of ``UNSAFE_SHARE`` unsafe requests, a quarter benign security questions and the
    rest ordinary questions."""
    bad = [q for q in rows if q["unsafe"]]
    good = [q for q in rows if not q["unsafe"] and q["kind"] != "ordinary"]
    plain = [q for q in rows if q["kind"] == "ordinary"]
    n_bad, n_good = round(size * UNSAFE_SHARE), size // 4
    rest = size - n_bad - n_good
    return rng.sample(bad, n_bad) + rng.sample(good, n_good) + rng.sample(plain, rest)


def train(
    model: Classifier,
    rows: list[Row],
    tuning: list[Row],
    *,
    steps: int,
    batch: int,
    lr: float,
    every: int,
    minutes: float,
    log: Path,
    seed: int,
) -> list[dict[str, Any]]:
    """Train; log the loss every ten steps and the tuning figures every ``every`` steps."""
    import torch

    rng = random.Random(seed)
    opt = torch.optim.AdamW(
        [
            {"params": [p for p in model.encoder.model.parameters() if p.requires_grad], "lr": lr},
            {"params": list(model.head.parameters()), "lr": lr * 20},
        ],
        weight_decay=0.0,
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    started, losses, curve = time.monotonic(), [], []
    model.encoder.model.train()
    for step in range(1, steps + 1):
        for g, base in zip(opt.param_groups, (lr, lr * 20), strict=True):
            g["lr"] = base * min(1.0, step / 20) * max(0.0, (steps - step + 1) / steps)
        part = balanced(rows, batch, rng)
        y = torch.tensor([float(q["unsafe"]) for q in part])
        loss = loss_fn(model.logits([q["query"] for q in part]), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        if step % 10 == 0:
            entry: dict[str, Any] = {
                "step": step,
                "loss": round(float(np.mean(losses[-10:])), 4),
                "minutes": round((time.monotonic() - started) / 60, 1),
            }
            if tuning and (step % every == 0 or step == steps):
                p = model.probabilities([q["query"] for q in tuning])
                t = threshold(p, tuning)
                entry["threshold"] = round(t, 4)
                entry["tuning"] = score(p, tuning, t)
                entry["tune.jsonl"] = score_of("u-tune-", p, tuning, t)
            curve.append(entry)
            print(json.dumps(entry, ensure_ascii=False), flush=True)
            with log.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        if (time.monotonic() - started) / 60 > minutes:
            print(f"stopped at step {step}: past {minutes} minutes", flush=True)
            break
    return curve


def logistic_on(fitting: list[Row], tuning: list[Row]) -> tuple[np.ndarray, Any]:
    """The shipped recipe (e5 vector + terms, the shipped C) fitted on ``fitting`` and its
    tuning-set probabilities, for comparison; and a scorer for other rows."""
    c = LOGISTIC_C
    y = np.array([int(q["unsafe"]) for q in fitting])
    vecs = logistic.vectors("vector2", [q["query"] for q in fitting])
    bags = [logistic.shipped.terms(q["query"]) for q in fitting]
    vocab, idf = logistic.vocabulary(bags)
    lr = logistic.fit(logistic.with_terms(vecs, bags, vocab, idf), y, c)

    def scorer(rows: list[Row]) -> np.ndarray:
        v = logistic.vectors("vector2", [q["query"] for q in rows])
        b = [logistic.shipped.terms(q["query"]) for q in rows]
        return lr.predict_proba(logistic.with_terms(v, b, vocab, idf))[:, 1]

    return scorer(tuning), scorer


def restore(model: Classifier, run: Path) -> dict[str, Any]:
    """Load a run's adapters and head into ``model``; the saved record."""
    import torch

    saved: dict[str, Any] = torch.load(run / "classifier.pt")
    missing = model.encoder.model.load_state_dict(saved["lora"], strict=False)
    if any("lora_" in k for k in missing.missing_keys):
        raise SystemExit(f"{run}: the saved adapters do not fit this model")
    model.head.load_state_dict(saved["head"])
    return saved


def adapter_parts(lora: dict[str, Any], scaling: float) -> dict[str, np.ndarray]:
    """peft's adapter tensors as the embedder reads them: ``NAME.a`` and ``NAME.b`` (scaling
    folded into ``b``) per adapted layer, ``NAME`` the BERT parameter path, fp16."""
    out: dict[str, np.ndarray] = {}
    for key, tensor in lora.items():
        # base_model.model.encoder.layer.0.attention.self.query.lora_A.default.weight
        path, _, rest = key.removeprefix("base_model.model.").partition(".lora_")
        side = rest.split(".", 1)[0]
        value = tensor.float().numpy() * (scaling if side == "B" else 1.0)
        out[f"{path}.{side.lower()}"] = value.astype(np.float16)
    return out


def product_probabilities(rows: list[Row]) -> np.ndarray:
    """p(unsafe) of each question as the product computes it: the embedder's reader (in the
    precision it serves) and the retriever's shipped rule."""

    m = shipped.load_model(shipped.TUNED_FILE)
    assert m is not None
    out = []
    for i in range(0, len(rows), 64):
        part = rows[i : i + 64]
        vecs = embed_queries(m.space, [q["query"] for q in part])
        if vecs is None:
            raise SystemExit(
                "the embedder has no unsafe reader: is CODERAG_EMBED_MODEL_2 e5-small?"
            )
        out += [
            m.p_unsafe(v.astype(np.float64), q["query"]) for q, v in zip(part, vecs, strict=True)
        ]
    return np.array(out)


def export(
    model: Classifier,
    run: Path,
    fitting: list[Row],
    tuning: list[Row],
    argv: list[str],
    sets: tuple[str, ...],
) -> int:
    """Ship a run: the adapter beside the embedder, the head and a threshold chosen on the
    tuning set as the product scores it (the reader in its serving precision) beside the
    retriever, each with its card; then the frozen sets, read once, as the product scores
    them."""
    from safetensors.numpy import save_file

    os.environ["CODERAG_UNSAFE_RULE"] = "tuned"  # the embedder serves the reader only then
    get_settings.cache_clear()
    started = time.monotonic()
    saved = restore(model, run)
    rank = next(v.shape[0] for k, v in saved["lora"].items() if "lora_A" in k)
    curve = [json.loads(x) for x in (run / "log.jsonl").read_text().splitlines() if x]
    command = " ".join(["python -m coderag_training.fit.unsafe_tuned", *argv])
    data = logistic.gather(tuple(s for s in sets if s not in logistic.SHIPPED_SETS))
    unread = {*logistic.ordinary_files(("test", "test2")), logistic.UNSAFE / "test.jsonl"}
    files = [f for f in data.files if f not in unread]
    questions = {"fitted on": len(fitting), "tuning": len(tuning)}

    def card(target: Path, extra: dict[str, Any], held_out: dict[str, Any]) -> None:
        cards.write_card(
            target,
            command=command,
            inputs=files,
            code_bases=data.code_bases,
            questions=questions,
            steps=curve[-1]["step"] if curve else None,
            seconds=time.monotonic() - started,
            loss=[e["loss"] for e in curve],
            held_out=held_out,
            extra=extra,
            notes="held_out: bench/questions/unsafe/test.jsonl, test2.jsonl and issue 41's "
            "harmless set with its unsafe requests (issue41), scored as the product scores them",
        )

    config = model.encoder.model.peft_config["default"]
    save_file(adapter_parts(saved["lora"], config.lora_alpha / config.r), str(reader.ADAPTER))
    reader.ADAPTER.chmod(0o644)  # safetensors writes 0600: a service's own user must read it
    card(reader.ADAPTER, {"rank": rank, "tokens": reader.TOKENS}, {})
    weights = (model.head.weight.detach().numpy()[0] * model.scale).tolist()
    head = shipped.Model(
        space="unsafe",
        encoder=get_settings().embed_model_2,
        weights=[logistic.sig(float(w)) for w in weights],
        bias=logistic.sig(float(model.head.bias.detach().numpy()[0])),
        threshold=1.0,
        fitted_on=f"e5-small with LoRA r={rank} and this head, {len(fitting)} questions: "
        f"bench/questions/unsafe/ {', '.join(sets)} (less tune) and the ordinary questions "
        "(coderag_training.fit.unsafe_tuned)",
    )
    shipped.save(head, shipped.TUNED_FILE)
    card(shipped.TUNED_FILE, {}, {})  # the threshold comes next, from the product's scores
    p = product_probabilities(tuning)
    t = logistic.sig(threshold(p, tuning))
    shipped.save(replace(head, threshold=t), shipped.TUNED_FILE)
    tuned = {"tuning": score(p, tuning, t), "tune.jsonl": score_of("u-tune-", p, tuning, t)}
    card(shipped.TUNED_FILE, {"threshold": t, "tuning": tuned}, {})
    print(json.dumps({"threshold": t, **tuned}), flush=True)
    held_out: dict[str, Any] = {}
    for name, rows in frozen_sets().items():
        held_out[name] = score(product_probabilities(rows), rows, t)
        print(json.dumps({"frozen": name, "product": held_out[name]}), flush=True)
    card(reader.ADAPTER, {"rank": rank, "tokens": reader.TOKENS}, held_out)
    card(shipped.TUNED_FILE, {"threshold": t, "tuning": tuned}, held_out)
    return 0


def report(model: Classifier, run: Path, fitting: list[Row], tuning: list[Row]) -> int:
    """The frozen sets, read once: a run's classifier at its tuning threshold beside the
    logistic rule fitted on the same rows at its own tuning threshold."""
    saved = restore(model, run)
    t = float(saved["threshold"])
    lp, scorer = logistic_on(fitting, tuning)
    lt = threshold(lp, tuning)
    print(json.dumps({"thresholds": {"tuned": t, "logistic": lt}}))
    for name, rows in frozen_sets().items():
        p = model.probabilities([q["query"] for q in rows])
        print(json.dumps({"frozen": name, "tuned": score(p, rows, t)}), flush=True)
        print(json.dumps({"frozen": name, "logistic": score(scorer(rows), rows, lt)}), flush=True)
    return 0


def main(argv: list[str]) -> int:
    """Overfit check, or a training run with its tuning curve (and, with --report, the frozen
    sets read once)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("mode", choices=("overfit", "train", "report", "export"))
    ap.add_argument("--name", default="u1")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=80.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--also", action="append", default=[], help="fit on this set too (train5)")
    ap.add_argument("--baseline", action="store_true", help="score the logistic rule too")
    args = ap.parse_args(argv)
    run = RUNS / args.name
    run.mkdir(parents=True, exist_ok=True)
    fitting, tuning = split_rows(args.seed, tuple(args.also))
    print(f"fitting {len(fitting)} rows, tuning {len(tuning)}", flush=True)
    model = Classifier(RUNS, args.rank, args.seed)
    if args.mode == "report":
        return report(model, run, fitting, tuning)
    if args.mode == "export":
        return export(model, run, fitting, tuning, argv, (*logistic.SHIPPED_SETS, *args.also))
    if args.mode == "overfit":
        rng = random.Random(args.seed)
        small = balanced(fitting, 256, rng)
        fitting, tuning = small, small
    if args.baseline:
        lp, _ = logistic_on(fitting, tuning)
        lt = threshold(lp, tuning)
        print(json.dumps({"logistic tuning": score(lp, tuning, lt), "threshold": lt}), flush=True)
        print(json.dumps({"logistic tune.jsonl": score_of("u-tune-", lp, tuning, lt)}), flush=True)
    log = run / "log.jsonl"
    log.write_text("", encoding="utf-8")
    curve = train(
        model,
        fitting,
        tuning,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        every=args.every,
        minutes=args.minutes,
        log=log,
        seed=args.seed,
    )
    import torch

    torch.save(
        {
            "lora": {k: v for k, v in model.encoder.model.state_dict().items() if "lora_" in k},
            "head": model.head.state_dict(),
            "scale": model.scale,
            "threshold": curve[-1].get("threshold") if curve else None,
        },
        run / "classifier.pt",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
