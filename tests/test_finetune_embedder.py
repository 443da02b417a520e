"""Contrastive fine-tuning on a real git history: pair mining, NT-Xent, a tiny RoBERTa trained by
the plain PyTorch loop, and its output loaded back through the embedder's ``Encoder``."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import git
import numpy as np
import pytest
import torch

from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.settings import get_settings
from coderag.store import get_catalog
from coderag_embedder.encoder import Encoder, unit_text
from coderag_parser.units import parse_source
from coderag_training.embedder.evaluation import evaluate
from coderag_training.embedder.finetune import main
from coderag_training.embedder.pairs import (
    Pair,
    head_of,
    mine_pairs,
    retriever_hard_negatives,
    split_by_symbol,
)
from coderag_training.embedder.training import SUMMARY_FILE, nt_xent, train
from tests.conftest import commit_all
from tests.tinymodels import build_tiny_roberta

V1 = '''import logging

log = logging.getLogger(__name__)


def create_order(user, items):
    """Create an order for a user."""
    order = {"user": user, "items": items}
    return save(order)


def save(order):
    cache[order["id"]] = order
    return order


def fetch_user(id, client):
    user = client.get(id)
    return user


def load_items(base, json):
    items = json.load(base)
    items = [i for i in items if i]
    return items


def process_request(ctx, request):
    error = request.get("error")
    return error


class Store:
    def get(self, id):
        return self.cache.get(id)

    def fetch(self, id, client):
        data = client.fetch(id)
        return data
'''

EDITS = [
    (  # renamed variables
        "rename variables",
        [
            ("    user = client.get(id)\n    return user", "    u = client.get(id)\n    return u"),
            (
                "        data = client.fetch(id)\n        return data",
                "        d = client.fetch(id)\n        return d",
            ),
        ],
    ),
    (  # reordered statements
        "reorder statements",
        [
            (
                '    order = {"user": user, "items": items}\n    return save(order)',
                '    order = {"items": items, "user": user}\n    return save(order)',
            ),
            (
                "    items = json.load(base)\n    items = [i for i in items if i]",
                "    loaded = json.load(base)\n    items = [i for i in loaded if i]",
            ),
        ],
    ),
    (  # added logging
        "add logging",
        [
            (
                '    error = request.get("error")\n    return error',
                '    error = request.get("error")\n    log.info("request error %s", error)\n'
                "    return error",
            ),
            (
                '    cache[order["id"]] = order\n    return order',
                '    log.debug("save order %s", order["id"])\n    cache[order["id"]] = order\n'
                "    return order",
            ),
            (
                "        return self.cache.get(id)",
                '        log.info("store get %s", id)\n        return self.cache.get(id)',
            ),
        ],
    ),
    (  # a second round
        "more logging",
        [
            (
                "    u = client.get(id)\n    return u",
                '    u = client.get(id)\n    log.info("user %s", id)\n    return u',
            ),
            (
                '    order = {"items": items, "user": user}',
                '    log.info("create order")\n    order = {"items": items, "user": user}',
            ),
            (
                "    items = [i for i in loaded if i]\n    return items",
                "    return [i for i in loaded if i]",
            ),
            (
                "        d = client.fetch(id)\n        return d",
                '        d = client.fetch(id)\n        log.debug("got %s", id)\n        return d',
            ),
        ],
    ),
]


def _commit(repo: git.Repo, message: str, n: int) -> None:
    """Commit everything at a fixed date, so the history (and its shas) is the same every run."""
    repo.git.add(A=True)
    date = f"{1_700_000_000 + 3600 * n} +0000"
    author = git.Actor("Ada", "ada@example.com")
    repo.index.commit(message, author=author, committer=author, author_date=date, commit_date=date)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with four commits editing the functions of ``shop/orders.py``, plus a file
    without a grammar and an added file (neither yields pairs)."""
    root = tmp_path_factory.mktemp("history") / "shop-repo"
    (root / "shop").mkdir(parents=True)
    repo = git.Repo.init(root)
    (root / "shop" / "orders.py").write_text(V1)
    (root / "README.md").write_text("# shop\n")
    _commit(repo, "initial", 0)
    for i, (message, edits) in enumerate(EDITS):
        path = root / "shop" / "orders.py"
        text = path.read_text()
        for old, new in edits:
            assert old in text, old
            text = text.replace(old, new)
        path.write_text(text)
        (root / "README.md").write_text(f"# shop\n\nrevision {i}\n")
        if i == 1:
            (root / "shop" / "users.py").write_text("def get_user(id):\n    return id\n")
        _commit(repo, message, i + 1)
    return root


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny RoBERTa, seeded so the run is reproducible."""
    torch.manual_seed(0)
    return build_tiny_roberta(tmp_path_factory.mktemp("tiny") / "roberta")


def _functions_at(repo: git.Repo, sha: str, path: str) -> dict[str, object]:
    source = repo.commit(sha).tree[path].data_stream.read().decode()
    parsed = parse_source(Path(repo.working_dir).name, path, "python", source)
    return {u.symbol: u for u in parsed.units if u.kind in ("function", "method")}


def test_mined_pairs_are_versions_of_one_symbol_with_unrelated_same_file_negatives(
    history: Path,
) -> None:
    pairs = mine_pairs(history)
    repo = git.Repo(history)
    symbols = {p.symbol for p in pairs}
    assert symbols == {
        "create_order",
        "save",
        "fetch_user",
        "load_items",
        "process_request",
        "Store.get",
        "Store.fetch",
    }
    assert len(pairs) == 11  # 2 + 2 + 3 + 4 changed functions
    assert {p.file for p in pairs} == {"shop/orders.py"}
    for p in pairs:
        parent = repo.commit(p.commit).parents[0].hexsha
        before = _functions_at(repo, parent, p.file)[p.symbol]
        after = _functions_at(repo, p.commit, p.file)[p.symbol]
        assert p.anchor == unit_text(before) and p.positive == unit_text(after)
        assert p.anchor != p.positive and head_of(p.anchor) == head_of(p.positive)
        now = _functions_at(repo, p.commit, p.file)
        assert p.negative_symbols and p.symbol not in p.negative_symbols
        for sym, text in zip(p.negative_symbols, p.negatives, strict=True):
            assert text == unit_text(now[sym])  # a function of the same file at that commit
        # create_order calls save: neither is ever the other's negative
        if p.symbol == "create_order":
            assert "save" not in p.negative_symbols
        if p.symbol == "save":
            assert "create_order" not in p.negative_symbols
        assert p.hard_negatives == ()
    assert mine_pairs(history, max_commits=1) == [p for p in pairs if p.commit == pairs[-1].commit]


def test_hard_negatives_come_from_the_callable_and_never_repeat_the_pair(history: Path) -> None:
    def confusers(text: str) -> list[str]:
        return [text, "python function other\ndef other(): pass", text + "\n    # changed"]

    pairs = mine_pairs(history, hard_negatives=confusers)
    for p in pairs:
        # the anchor itself and texts of the anchor's own symbol are dropped
        assert p.hard_negatives == ("python function other\ndef other(): pass",)
        assert p.all_negatives() == (*p.negatives, *p.hard_negatives)


def test_retriever_hard_negatives_rank_other_units(
    history: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODERAG_EMBED_MODEL", str(tiny_model))
    get_settings.cache_clear()
    get_catalog().create_repo("shop", str(history), None, None)
    run_now(IndexRepo(repo="shop"))
    pairs = mine_pairs(history, max_commits=1, hard_negatives=retriever_hard_negatives("shop", 3))
    assert pairs
    for p in pairs:
        assert 1 <= len(p.hard_negatives) <= 3
        assert all(head_of(t) != head_of(p.anchor) for t in p.hard_negatives)
        assert p.positive not in p.hard_negatives


def test_nt_xent_rewards_aligned_pairs_and_masks_other_versions() -> None:
    eye = torch.eye(4)
    anchors, positives, negatives = eye[:2], eye[:2].clone(), eye[2:]
    keys = ["a", "b", "a", "b", "c", "d"]
    good = nt_xent(anchors, positives, negatives, keys, 0.07)
    swapped = nt_xent(anchors, positives.flip(0), negatives, keys, 0.07)
    assert float(good) < 1e-3 < float(swapped)
    # a negative that is another version of the anchor's function is masked, not penalised
    same = nt_xent(anchors, positives, eye[:2].clone(), ["a", "b", "a", "b", "a", "b"], 0.07)
    assert float(same) < 1e-3


def test_split_keeps_each_function_on_one_side(history: Path) -> None:
    pairs = mine_pairs(history)
    train_pairs, held = split_by_symbol(pairs, held_out=0.3, seed=0)
    assert held and train_pairs
    held_keys = {p.key for p in held}
    assert not held_keys & {p.key for p in train_pairs}
    assert len(train_pairs) + len(held) == len(pairs)
    for p in train_pairs:
        assert not {f"{p.file}::{s}" for s in p.negative_symbols} & held_keys


def test_train_tiny_roberta(history: Path, tiny_model: Path, tmp_path: Path) -> None:
    pairs = mine_pairs(history)
    out = tmp_path / "tuned"
    # every explicit negative in every step, so the curve's noise is batch order and dropout only
    summary = train(
        tiny_model,
        pairs,
        out,
        steps=40,
        batch_size=4,
        accumulation=2,
        negatives_per_pair=4,
        max_length=64,
        device="cpu",
    )
    losses = summary["loss_curve"]
    assert len(losses) == 40 and all(math.isfinite(x) for x in losses)
    assert np.mean(losses[20:]) < np.mean(losses[:20])
    recorded = json.loads((out / SUMMARY_FILE).read_text())
    params = recorded["params"]
    assert params["lr"] == 2e-5 and params["temperature"] == 0.07
    assert params["max_grad_norm"] == 1.0 and params["warmup"] == 0.1
    assert params["batch_size"] == 4 and params["accumulation"] == 2
    assert recorded["pairs"] == len(pairs) and recorded["loss_curve"] == losses
    # linear warmup over the first 4 steps (10% of 40), then linear decay
    lrs = recorded["lr_curve"]
    assert recorded["params"]["warmup_steps"] == 4
    assert lrs[:5] == pytest.approx([5e-6, 1e-5, 1.5e-5, 2e-5, 2e-5])
    assert all(a > b for a, b in itertools.pairwise(lrs[4:])) and lrs[-1] > 0
    norms = recorded["grad_norm_pre_clip"]
    assert len(norms) == 40 and all(math.isfinite(n) and n > 0 for n in norms)
    assert recorded["clipped_steps"] == sum(n > 1.0 for n in norms) > 0
    enc = Encoder(out, pooling="mean")
    vecs = enc.encode([p.anchor for p in pairs[:3]])
    assert vecs.shape == (3, 32) and np.allclose(np.linalg.norm(vecs, axis=1), 1, atol=1e-5)
    before, after = evaluate(tiny_model, pairs), evaluate(out, pairs)
    for m in (before, after):
        assert m["pairs"] == len(pairs) and 0 <= m["recall@1"] <= m["mrr"] <= 1
    assert after["cos_gap"] > before["cos_gap"]


def test_cli_trains_and_reports_before_and_after(
    history: Path, tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    argv = ["--repo-path", str(history), "--base-model", str(tiny_model), "--out", str(out)]
    argv += ["--steps", "2", "--batch-size", "4", "--accumulation", "1", "--max-length", "64"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| recall@1 |" in printed and "| mrr |" in printed
    record = json.loads((out / SUMMARY_FILE).read_text())
    assert record["evaluation"]["held_out_pairs"] > 0
    assert set(record["evaluation"]["before"]) >= {"recall@1", "mrr", "cos_pos", "cos_neg"}
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.py").write_text("def f():\n    return 1\n")
    commit_all(git.Repo.init(empty), "only commit")
    assert main(["--repo-path", str(empty), "--base-model", str(tiny_model)]) == 1


def test_split_drops_held_out_texts_from_training_negatives() -> None:
    def pair(sym: str, negs: tuple[str, ...], hard: tuple[str, ...] = ()) -> Pair:
        text = f"python function {sym}\ndef {sym}(): pass"
        neg_texts = tuple(f"python function {n}\ndef {n}(): ..." for n in negs)
        return Pair("a.py", sym, "0" * 40, text, text + " # v2", neg_texts, negs, hard)

    pairs = [pair(s, tuple(n for n in "fgh" if n != s), ("python function h\nx",)) for s in "fgh"]
    train_pairs, held = split_by_symbol(pairs, held_out=0.34, seed=1)
    assert len(held) == 1 and len(train_pairs) == 2
    gone = held[0].symbol
    for p in train_pairs:
        assert gone not in p.negative_symbols
        assert all(head_of(t) != f"python function {gone}" for t in p.all_negatives())
    assert split_by_symbol(pairs, held_out=0.0) == (pairs, [])
