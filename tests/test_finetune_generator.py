"""Generator LoRA fine-tuning (G6) end to end on a tiny Qwen2 built offline: trap samples from an
indexed repository, a short training run, the adapter loaded by the hf backend, and its GGUF
conversion loaded by llama.cpp on top of a GGUF of the same base model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.settings import Settings, get_settings
from coderag.store import get_catalog
from coderag_generator import prompts
from coderag_generator.backends import get_backend
from coderag_generator.backends.hf import HFBackend
from coderag_generator.chat_tokens import collate, encode, end_of_turn
from coderag_training.generator.compliance import CLARIFY_MARKERS, NEGATIONS, cites_target, comply
from coderag_training.generator.finetune import GGUF_FILE, SUMMARY_FILE, main
from coderag_training.generator.gguf_tools import llama_cpp_tools
from coderag_training.generator.training import answer_loss, lora_config
from coderag_training.generator.traps import KINDS, build_traps
from tests.tinymodels import build_tiny_qwen2, build_tiny_roberta

_HAN = re.compile(r"[\u3400-\u9fff]")

BASE_TO_GGUF = """
import runpy, sys
tools, model, out = sys.argv[1:4]
sys.path[:0] = [tools, tools + "/gguf-py"]
import conversion.base, conversion.qwen
# the tiny BPE tokenizer is unknown to llama.cpp's pre-tokenizer table: label it as Qwen2's
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
conversion.qwen.Qwen2Model.set_vocab = lambda self: self._set_vocab_gpt2()
sys.argv = ["convert_hf_to_gguf.py", "--outfile", out, "--outtype", "f32", model]
runpy.run_path(tools + "/convert_hf_to_gguf.py", run_name="__main__")
"""
"""Converts the tiny Qwen2 itself to GGUF, so that llama.cpp has a base to put the LoRA on."""


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen2(tmp_path_factory.mktemp("qwen2") / "model")


@pytest.fixture
def indexed(sample_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CODERAG_EMBED_MODEL", str(build_tiny_roberta(tmp_path / "roberta")))
    get_settings.cache_clear()
    get_catalog().create_repo("sample", str(sample_repo), None, None)
    run_now(IndexRepo(repo="sample"))
    assert get_catalog().get_repo("sample").status == "ready"
    return "sample"


def test_traps_come_from_the_indexed_repository(indexed: str) -> None:
    traps = build_traps(indexed, n=200, seed=3)
    samples = traps.train + traps.held_out
    assert 150 <= len(samples) <= 200
    assert {(s.kind, s.lang) for s in samples} == {
        (k, lang) for k in KINDS for lang in ("en", "zh")
    }
    assert traps.train and traps.held_out
    assert not {s.symbol for s in traps.train} & {s.symbol for s in traps.held_out}
    again = build_traps(indexed, n=200, seed=3)
    assert again.train == traps.train and again.held_out == traps.held_out

    units = get_catalog().units(indexed)
    for s in samples:
        assert s.system == prompts.load("system", s.lang)
        assert f"{s.question}" in s.user and all(
            f"FILE: {f}:{a}-{b}" in s.user for f, a, b in s.context
        )
        assert bool(_HAN.search(s.target)) == (s.lang == "zh"), s.target
        assert comply(s, s.target, traps.lines_of), (s.kind, s.target)  # targets are compliant
        if s.kind == "A":
            assert s.target == prompts.load("refusal", s.lang) and s.cite is None
        elif s.kind == "B":
            assert CLARIFY_MARKERS[s.lang] in s.target and s.cite is None
        else:
            assert s.cite is not None
            path, start, end = s.cite
            unit = next(u for u in units if u.file == path and u.start_line == start)
            assert end <= unit.end_line and unit.symbol == s.symbol
            assert f"FILE: {path}:{start}-{end}" in s.target
            assert cites_target(s, s.target, traps.lines_of)
            if s.kind == "C":
                assert s.target.startswith(NEGATIONS[s.lang])
    # a refusal is not compliant for a grounded question, nor a citation of another unit
    grounded = next(s for s in samples if s.kind == "grounded")
    assert not comply(grounded, prompts.load("refusal", grounded.lang), traps.lines_of)
    other = (
        next(c for c in grounded.context if c != grounded.cite)
        if len(grounded.context) > 1
        else None
    )
    if other:
        assert not comply(grounded, f"See FILE: {other[0]}:{other[1]}-{other[2]}.", traps.lines_of)


def test_loss_is_on_the_answer_only(indexed: str, qwen: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen, local_files_only=True)
    sample = build_traps(indexed, n=20).train[0]
    end = end_of_turn(tok)
    assert tok.convert_ids_to_tokens(end) == ["<|im_end|>"]
    enc = encode(tok, sample, 4096, end)
    assert enc is not None
    answer = [t for t, lab in zip(enc.ids, enc.labels, strict=True) if lab != -100]
    assert tok.decode(answer) == sample.target + "<|im_end|>"
    assert enc.labels[-len(answer) :] == answer and set(enc.labels[: -len(answer)]) == {-100}
    assert encode(tok, sample, 50, end) is None

    # left-padded batches with the LM head on answer positions only: the same loss as the model's
    # own over each whole unpadded sequence (token-weighted)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(qwen, local_files_only=True).eval()
    pair = [e for s in build_traps(indexed, n=20).train[:2] if (e := encode(tok, s, 4096, end))]
    assert len(pair) == 2 and len(pair[0].ids) != len(pair[1].ids)
    with torch.no_grad():
        got = answer_loss(model, collate(pair, tok.pad_token_id))
        losses = [model(torch.tensor([e.ids]), labels=torch.tensor([e.labels])).loss for e in pair]
    counts = [sum(lab != -100 for lab in e.labels[1:]) for e in pair]  # predicted positions
    want = sum(loss * c for loss, c in zip(losses, counts, strict=True)) / sum(counts)
    assert torch.allclose(got, want, atol=1e-5)


@pytest.mark.slow
def test_finetune_chain_to_hf_backend_and_llama_cpp(
    indexed: str, qwen: Path, tmp_path: Path
) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    config = lora_config()
    assert (config.r, config.lora_alpha, config.lora_dropout) == (8, 16, 0.1)
    assert set(config.target_modules) == {"q_proj", "v_proj"}

    out = tmp_path / "lora"
    argv = ["--repo", indexed, "--base-model", str(qwen), "--out", str(out), "--samples", "120"]
    argv += ["--steps", "10", "--batch-size", "2", "--lr", "1e-2", "--log-every", "5"]
    argv += ["--eval-limit", "4", "--eval-max-tokens", "8"]
    assert main(argv) == 0

    summary = json.loads((out / SUMMARY_FILE).read_text())
    losses = summary["losses"]
    assert len(losses) == 10 and sum(losses[-3:]) / 3 < sum(losses[:3]) / 3
    assert summary["compliance"]["before"]["all"]["n"] == 4
    assert summary["compliance"]["after"]["all"]["n"] == 4
    saved = json.loads((out / "adapter_config.json").read_text())
    assert (saved["peft_type"], saved["r"], saved["lora_alpha"]) == ("LORA", 8, 16)
    assert saved["lora_dropout"] == 0.1 and set(saved["target_modules"]) == {"q_proj", "v_proj"}
    weights = load_file(out / "adapter_model.safetensors")
    assert {re.sub(r".*\.(\w+_proj)\.(lora_[AB])\.weight$", r"\1 \2", k) for k in weights} == {
        "q_proj lora_A",
        "q_proj lora_B",
        "v_proj lora_A",
        "v_proj lora_B",
    }
    assert any(k.endswith("lora_B.weight") and v.abs().max() > 0 for k, v in weights.items())

    # the hf backend loads the adapter through its settings and answers with it
    backend = get_backend(
        Settings(llm_backend="hf", llm_hf_model=str(qwen), llm_adapter_path=str(out))
    )
    assert isinstance(backend, HFBackend) and backend.adapter == out
    base = AutoModelForCausalLM.from_pretrained(qwen, local_files_only=True).eval()
    ids = [5, 17, 42, 99, 7, 120, 33]
    with torch.no_grad():
        plain = base(torch.tensor([ids])).logits[0].numpy()
        reference = PeftModel.from_pretrained(base, str(out)).eval()
        tuned = reference(torch.tensor([ids])).logits[0].numpy()
        served = backend.model(torch.tensor([ids])).logits[0].numpy()
    assert np.abs(served - tuned).max() < 1e-4
    effect = np.abs(tuned - plain).max()
    assert effect > 1e-3
    messages = [{"role": "user", "content": "What does save do?"}]
    assert list(backend.stream(backend.render(messages), temperature=0.0, top_p=1.0, max_tokens=4))

    # the GGUF LoRA: written by llama.cpp's converter, with the q/v tensors of both layers
    gguf_path = out / GGUF_FILE
    assert summary["gguf"] == str(gguf_path) and gguf_path.is_file()
    tools = llama_cpp_tools()
    sys.path.insert(0, str(tools / "gguf-py"))
    try:
        import gguf
    finally:
        sys.path.remove(str(tools / "gguf-py"))
    reader = gguf.GGUFReader(gguf_path)
    assert {t.name for t in reader.tensors} == {
        f"blk.{i}.attn_{p}.weight.lora_{ab}" for i in (0, 1) for p in "qv" for ab in "ab"
    }
    assert reader.fields["general.type"].contents() == "adapter"
    assert reader.fields["adapter.type"].contents() == "lora"
    assert reader.fields["adapter.lora.alpha"].contents() == 16.0
    assert reader.fields["general.architecture"].contents() == "qwen2"

    # llama.cpp applies it to a GGUF of the same base: the logits match peft's
    from llama_cpp import Llama

    base_gguf = tmp_path / "base.gguf"
    proc = subprocess.run(
        [sys.executable, "-c", BASE_TO_GGUF, str(tools), str(qwen), str(base_gguf)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]

    def llama_logits(**lora: str) -> np.ndarray:
        llm = Llama(
            model_path=str(base_gguf), n_ctx=64, n_threads=2, logits_all=True, verbose=False, **lora
        )
        try:
            llm.eval(ids)
            return np.array(llm.scores[: len(ids)])
        finally:
            llm.close()

    assert np.abs(llama_logits() - plain).max() < 1e-3
    assert np.abs(llama_logits(lora_path=str(gguf_path)) - tuned).max() < 1e-3
