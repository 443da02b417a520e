"""transformers backend: a local causal-LM directory (Qwen2-7B-Instruct on a team's GPU box), with
an optional peft LoRA adapter merged into it; bf16 on CUDA, fp32 on CPU.

The tokenizer's own chat template renders the prompt and its token ids are what the model sees, so
the prompt's token count is exact. With ``CODERAG_LLM_COMPILE`` on CUDA the one-token decode step
runs on a static KV cache and is compiled (and warmed) here at startup, never inside a request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from coderag.errors import ConfigError, Unavailable
from coderag.settings import Settings
from coderag_generator.backends.base import UNGROUNDED, Grounding, Prompt
from coderag_generator.chat_tokens import prompt_ids

if TYPE_CHECKING:
    import torch
    from transformers import CompileConfig

log = logging.getLogger(__name__)

STREAM_TIMEOUT_S = 600.0
"""Longest wait for the next text piece before the request fails (a stuck GPU, not a slow one)."""

WARMUP_PROMPTS = ("warm up", "warm up the decode step once more, with a longer prompt")
"""Dummy prompts of two lengths, so any shape-driven recompilation also happens at startup."""


def _directory(value: str, env: str) -> Path:
    """The directory a setting names, or ConfigError that names the setting."""
    if not value:
        raise ConfigError(f"{env} is not set; point it at a local model directory")
    path = Path(value).expanduser()
    if not path.is_dir():
        raise ConfigError(f"{env}={value} is not a directory")
    return path


def _device(choice: str) -> str:
    """``cuda`` when asked for or (``auto``) present, else ``cpu``."""
    import torch

    if choice == "cuda" and not torch.cuda.is_available():
        raise ConfigError("CODERAG_DEVICE=cuda but torch sees no CUDA device")
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return choice


class _Cancel:
    """A stopping criterion that ends generation once the reader has gone away."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self, input_ids: torch.Tensor, scores: Any, **_: Any) -> torch.Tensor:
        import torch

        return torch.full(
            (input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device
        )


class HFBackend:
    """A Hugging Face causal LM (plus LoRA adapter) in this process."""

    name = "hf"

    def __init__(self, settings: Settings) -> None:
        base = _directory(settings.llm_hf_model, "CODERAG_LLM_HF_MODEL")
        adapter = (
            _directory(settings.llm_adapter_path, "CODERAG_LLM_ADAPTER_PATH")
            if settings.llm_adapter_path
            else None
        )
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = _device(settings.device)
        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
            # straight onto the device: a 7B model never needs a second copy in host memory
            model = AutoModelForCausalLM.from_pretrained(
                base, local_files_only=True, dtype=dtype, device_map=self.device
            )
        except (OSError, ValueError) as exc:
            raise ConfigError(f"CODERAG_LLM_HF_MODEL={base} is not a causal LM: {exc}") from exc
        if not self.tokenizer.chat_template:
            raise ConfigError(
                f"the tokenizer in {base} has no chat template (CODERAG_LLM_HF_MODEL)"
            )
        if adapter is not None:
            model = self._merge_adapter(model, adapter)
        self.model = model.eval()
        self.adapter = adapter
        max_positions = getattr(model.config, "max_position_embeddings", None)
        # the window bounds the static cache and the prompt budget; llm_context caps it
        self.window = min(settings.llm_context, max_positions or settings.llm_context)
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        self.eos_ids = sorted(eos_ids)
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.eos_ids[0] if self.eos_ids else 0
        self.cache: Any = None
        self._lock = threading.Lock()
        if settings.llm_compile:
            if self.device == "cuda":
                from transformers import CompileConfig

                self.enable_static_cache(CompileConfig(fullgraph=True, mode="reduce-overhead"))
            else:
                log.info("CODERAG_LLM_COMPILE ignored: compiling pays off on CUDA only")

    @staticmethod
    def _merge_adapter(model: Any, adapter: Path) -> Any:
        """Load the peft adapter and fold it into the weights (inference needs no unmerge)."""
        try:
            from peft import PeftModel
        except ImportError as exc:
            raise ConfigError("CODERAG_LLM_ADAPTER_PATH needs peft (pip install peft)") from exc
        try:
            peft_model = PeftModel.from_pretrained(model, str(adapter), is_trainable=False)
        except (OSError, ValueError, RuntimeError) as exc:
            raise ConfigError(
                f"CODERAG_LLM_ADAPTER_PATH={adapter} is not a LoRA adapter for this model: {exc}"
            ) from exc
        return peft_model.merge_and_unload()

    def enable_static_cache(self, compile_config: CompileConfig | None = None) -> None:
        """Decode on one preallocated KV cache of ``window`` tokens, compiled when a config is
        given, and warm it now so requests never compile."""
        from transformers import StaticCache

        self.cache = StaticCache(config=self.model.config, max_cache_len=self.window)
        self.model.generation_config.compile_config = compile_config
        self.model.generation_config.disable_compile = compile_config is None
        for text in WARMUP_PROMPTS:
            prompt = self.render([{"role": "user", "content": text}])
            for _ in self.stream(prompt, temperature=0.0, top_p=1.0, max_tokens=4):
                pass
        log.info("hf backend: static cache of %d tokens ready", self.window)

    def _ids(self, messages: list[dict[str, str]]) -> list[int]:
        # control tokens inside messages (retrieved code, the question) are encoded as plain text,
        # so a snippet containing "<|im_end|>" cannot end the user turn early
        return prompt_ids(self.tokenizer, messages)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the model's tokenizer (control tokens as plain text)."""
        return len(
            self.tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        )

    def render(self, messages: list[dict[str, str]]) -> Prompt:
        """Apply the tokenizer's chat template; the count is of the very ids generation uses."""
        # tokenize=False answers the text, one of the many types transformers annotates
        text = cast(
            str,
            self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False
            ),
        )
        return Prompt(messages=messages, text=text, tokens=len(self._ids(messages)))

    def stream(
        self,
        prompt: Prompt,
        *,
        temperature: float,
        top_p: float,
        max_tokens: int,
        grounding: Grounding = UNGROUNDED,
    ) -> Iterator[str]:
        """Generate in a worker thread and yield decoded text pieces; one request at a time.
        ``grounding`` is not read: the model sees the hits in the prompt."""
        import torch
        from transformers import StoppingCriteriaList, TextIteratorStreamer

        ids = torch.tensor([self._ids(prompt.messages)], device=self.device)
        streamer = TextIteratorStreamer(
            self.tokenizer, skip_prompt=True, skip_special_tokens=True, timeout=STREAM_TIMEOUT_S
        )
        cancel = _Cancel()
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": temperature, "top_p": top_p}
            if temperature > 0
            else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        )
        failure: list[BaseException] = []

        def run() -> None:
            try:
                if self.cache is not None:
                    self.cache.reset()  # a reused static cache must start empty
                # generate runs under no_grad; inference_mode tensors could not be reset in place
                self.model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=max_tokens,
                    eos_token_id=self.eos_ids,
                    pad_token_id=self.pad_id,
                    streamer=streamer,
                    stopping_criteria=StoppingCriteriaList([cancel]),
                    past_key_values=self.cache,
                    **sampling,
                )
            except BaseException as exc:  # re-raised in the reader's thread
                failure.append(exc)
                streamer.end()

        with self._lock:
            worker = threading.Thread(target=run, name="hf-generate", daemon=True)
            worker.start()
            try:
                for piece in streamer:
                    if piece:
                        yield piece
            finally:
                cancel.event.set()  # a closed stream stops generation at the next token
                worker.join()
        if failure:
            raise Unavailable(f"generation failed: {failure[0]}") from failure[0]
