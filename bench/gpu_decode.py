"""Decode speed of a Qwen2-7B-shaped model on one NVIDIA GPU: plain ``generate`` against the hf
backend's static-cache path compiled at startup, next to the memory-bandwidth floor.

The model has Qwen2-7B's dimensions (hidden 3584, 28 layers, 28 heads, 4 KV heads, intermediate
18944, vocabulary 152064, untied head) and random bf16 weights made directly on the GPU: nothing is
downloaded. The rows of the head that would emit a special token are zeroed, so greedy decoding
never stops early and every run produces exactly the tokens asked for. A word-level tokenizer over
the same vocabulary, with a ChatML template, lets ``coderag_generator.backends.hf.HFBackend`` load
the model through its own startup code (``CODERAG_LLM_COMPILE=1`` on CUDA: a static KV cache and
``torch.compile(fullgraph=True, mode="reduce-overhead")`` of the one-token step, warmed at
startup); its constructor's time is reported as compile time, never as decode time.

Decode speed is measured without the prompt: (N - 1) / (t(N tokens) - t(1 token)), medians over
``--repeats`` runs; the steady rate leaves out the first 16 tokens of each request (the backend
generates in a new thread per request, and CUDA graphs are recorded per thread, so capture may
recur in every request: the gap between the two rates shows it). The floor is the bytes of all
weights (about 15.2 GB in bf16) read once per token at the GPU's memory bandwidth
(``--bandwidth-tbs``, 4.8 TB/s for an H200): about 315 tokens/s.

    python -m bench.gpu_decode [--new-tokens 128] [--prompt-tokens 128] [--repeats 3] [--layers 28]

Without CUDA it says so and exits with status 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

QWEN2_7B = {
    "hidden_size": 3584,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "intermediate_size": 18944,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
}
"""Qwen2-7B(-Instruct)'s config.json dimensions."""

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>")
"""Token ids 0-3; the words ``w4`` .. ``w152063`` fill the rest of the vocabulary."""

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""Qwen2's chat template."""


def qwen2_7b_config(layers: int = 28) -> Any:
    """A Qwen2Config with the 7B dimensions (fewer layers for a quick check)."""
    from transformers import Qwen2Config

    return Qwen2Config(
        **{**QWEN2_7B, "num_hidden_layers": layers},
        bos_token_id=None,
        eos_token_id=SPECIALS.index("<|im_end|>"),
        pad_token_id=SPECIALS.index("<|endoftext|>"),
    )


def write_tokenizer(dest: Path, vocab_size: int) -> Path:
    """A word-level tokenizer covering every id of the model, with the ChatML template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["user", "assistant", "system"]
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for i in range(len(SPECIALS), vocab_size):
        vocab[words[i - len(SPECIALS)] if i - len(SPECIALS) < len(words) else f"w{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = CHATML
    dest.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(dest)
    return dest


def random_model(config: Any, device: str) -> Any:
    """Qwen2ForCausalLM with random bf16 weights made on ``device``; special tokens unreachable."""
    import torch
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(config, dtype=torch.bfloat16)
    model = model.to(device)  # a no-op unless the device context was not honoured
    with torch.no_grad():
        model.lm_head.weight[: len(SPECIALS)] = 0  # logit 0 never wins against 152k others
    return model.eval()


def weight_bytes(model: Any) -> int:
    """Bytes of all parameters."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds ``fn`` takes on the device, and its result."""
    _sync()
    started = time.perf_counter()
    result = fn()
    _sync()
    return time.perf_counter() - started, result


class Stamps:
    """A ``generate`` streamer that notes when each new token arrives (the first put is the
    prompt)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.prompt_seen = False

    def put(self, value: Any) -> None:
        """Note a token (after the prompt)."""
        if self.prompt_seen:
            self.times.append(time.perf_counter())
        self.prompt_seen = True

    def end(self) -> None:
        """Nothing to flush."""


Run = Callable[[int], tuple[int, list[float]]]
"""Generates n tokens; returns how many came and when each arrived."""

STEADY_SKIP = 16
"""Tokens left out at the start of the steady-state rate (graph capture, allocator warm-up)."""


def steady_rate(stamps: list[float]) -> float:
    """Tokens/s between the ``STEADY_SKIP``-th token and the last."""
    skip = min(STEADY_SKIP, len(stamps) // 4)
    if len(stamps) - skip < 2:
        return float("nan")
    return (len(stamps) - 1 - skip) / (stamps[-1] - stamps[skip])


def decode_rate(run: Run, new_tokens: int, repeats: int) -> dict[str, Any]:
    """Tokens/s of decoding alone, from runs of 1 and ``new_tokens`` tokens (medians), and the
    steady-state rate within the runs."""
    ones, fulls, steady = [], [], []
    for _ in range(repeats):
        ones.append(timed(lambda: run(1))[0])
        secs, (count, stamps) = timed(lambda: run(new_tokens))
        if count != new_tokens:
            raise RuntimeError(f"asked for {new_tokens} tokens, got {count}")
        fulls.append(round(secs, 3))
        steady.append(steady_rate(stamps))
    decode = statistics.median(fulls) - statistics.median(ones)
    return {
        "first_token_s": statistics.median(ones),
        "tok_s": (new_tokens - 1) / decode,
        "steady_tok_s": statistics.median(steady),
        "runs_s": fulls,
    }


def plain_generate(model: Any, ids: Any) -> Run:
    """Runs of ``model.generate`` (dynamic cache, eager), greedy, streamed like the backend."""
    import torch

    def run(n: int) -> tuple[int, list[float]]:
        stamps = Stamps()
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                disable_compile=True,
                streamer=stamps,
            )
        return out.shape[1] - ids.shape[1], stamps.times

    return run


def backend_stream(backend: Any, prompt: Any) -> Run:
    """Runs of the hf backend's ``stream`` (static cache, compiled step); each streamed word is
    one token of the word-level vocabulary."""

    def run(n: int) -> tuple[int, list[float]]:
        pieces, stamps = [], []
        for piece in backend.stream(prompt, temperature=0.0, top_p=1.0, max_tokens=n):
            pieces.append(piece)
            stamps += [time.perf_counter()] * len(piece.split())
        return len("".join(pieces).split()), stamps

    return run


def load_backend(model: Any, model_dir: Path, compile_step: bool, device: str) -> Any:
    """``HFBackend`` built by its own constructor from settings, handed the in-memory model
    instead of reading weights from ``model_dir`` (which holds the tokenizer)."""
    from transformers import AutoModelForCausalLM

    from coderag.settings import Settings
    from coderag_generator.backends.hf import HFBackend

    settings = Settings(
        llm_backend="hf", llm_hf_model=str(model_dir), llm_compile=compile_step, device=device
    )
    with mock.patch.object(AutoModelForCausalLM, "from_pretrained", return_value=model):
        return HFBackend(settings)


def table(rows: list[tuple[str, str, str, float, float, float]]) -> str:
    """Markdown table of (path, compile s, prompt + first token s, tok/s, steady tok/s, floor)."""
    out = [
        "| decode path | compile s | prompt + 1st token s | decode tok/s | steady tok/s "
        "| of floor |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, compile_s, first_s, rate, steady, floor in rows:
        out.append(
            f"| {name} | {compile_s} | {first_s} | {rate:.1f} | {steady:.1f} | {rate / floor:.0%} |"
        )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    """Measure and print the table; status 0 (also when there is no CUDA)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--layers", type=int, default=28, help="fewer for a quick check")
    p.add_argument("--bandwidth-tbs", type=float, default=4.8, help="GPU memory bandwidth, TB/s")
    args = p.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print(
            f"gpu_decode: no CUDA device (torch {torch.__version__}); this benchmark needs an "
            "NVIDIA GPU, nothing was measured."
        )
        return 0
    device = "cuda"
    gpu = torch.cuda.get_device_name(0)
    config = qwen2_7b_config(args.layers)
    with tempfile.TemporaryDirectory() as tmp:
        # the tokenizer alone: with a config.json beside it, AutoTokenizer would pick Qwen2's
        model_dir = write_tokenizer(Path(tmp) / "qwen2-7b-shape", config.vocab_size)
        build_s, model = timed(lambda: random_model(config, device))
        nbytes = weight_bytes(model)
        floor = args.bandwidth_tbs * 1e12 / nbytes
        print(
            f"{gpu}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters, "
            f"{nbytes / 1e9:.1f} GB bf16, built in {build_s:.1f}s; floor {floor:.0f} tok/s "
            f"at {args.bandwidth_tbs} TB/s",
            flush=True,
        )
        words = " ".join(f"w{100 + i}" for i in range(args.prompt_tokens))
        messages = [{"role": "user", "content": words}]

        plain = load_backend(model, model_dir, compile_step=False, device=device)
        ids = torch.tensor([plain._ids(messages)], device=device)
        plain_generate(model, ids)(4)  # CUDA context and kernels, once
        eager = decode_rate(plain_generate(model, ids), args.new_tokens, args.repeats)
        print(f"plain generate: {eager}", flush=True)

        compile_s, backend = timed(lambda: load_backend(model, model_dir, True, device))
        assert backend.cache is not None, "the hf backend did not set up its static cache"
        prompt = backend.render(messages)
        compiled = decode_rate(backend_stream(backend, prompt), args.new_tokens, args.repeats)
        print(f"compiled ({compile_s:.1f}s to start): {compiled}", flush=True)

    print(
        f"\n{gpu}, Qwen2-7B shape ({args.layers} layers), bf16, batch 1, prompt "
        f"{ids.shape[1]} tokens, {args.new_tokens} new tokens, greedy, medians of {args.repeats}; "
        f"peak memory {torch.cuda.max_memory_allocated() / 1e9:.1f} GB\n"
    )
    print(
        table(
            [
                (
                    "plain `generate` (dynamic cache, eager)",
                    "-",
                    f"{eager['first_token_s']:.3f}",
                    eager["tok_s"],
                    eager["steady_tok_s"],
                    floor,
                ),
                (
                    "hf backend: static cache + torch.compile (reduce-overhead)",
                    f"{compile_s:.1f}",
                    f"{compiled['first_token_s']:.3f}",
                    compiled["tok_s"],
                    compiled["steady_tok_s"],
                    floor,
                ),
                (
                    f"memory-bandwidth floor ({nbytes / 1e9:.1f} GB / {args.bandwidth_tbs} TB/s)",
                    "-",
                    "-",
                    floor,
                    floor,
                    floor,
                ),
            ]
        )
    )
    print(
        "\ndecode tok/s = (N - 1) / (t(N) - t(1)) per request, everything included; steady tok/s"
        f" leaves out the first {STEADY_SKIP} tokens of each request."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
