"""Answer backends, chosen by ``CODERAG_LLM_BACKEND``."""

from __future__ import annotations

import threading

from coderag.settings import Settings, get_settings
from coderag_generator.backends.base import UNGROUNDED, Backend, Grounding, Prompt
from coderag_generator.backends.extractive import ExtractiveBackend
from coderag_generator.backends.hf import HFBackend
from coderag_generator.backends.llamacpp import LlamaCppBackend
from coderag_generator.backends.openai import OpenAIBackend

__all__ = ["UNGROUNDED", "Backend", "Grounding", "Prompt", "get_backend"]

_loaded: dict[tuple, Backend] = {}
_lock = threading.Lock()

_KEY_FIELDS = {
    "extractive": (),
    "llamacpp": ("llm_model_path", "llm_context", "llm_threads", "llm_gpu_layers"),
    "hf": ("llm_hf_model", "llm_adapter_path", "llm_compile", "llm_context", "device"),
    "openai": ("llm_base_url", "llm_model", "llm_api_key", "llm_context"),
}
"""The settings each backend is built from: a change to one of them loads a new backend."""


def _load(s: Settings) -> Backend:
    if s.llm_backend == "extractive":
        return ExtractiveBackend()
    if s.llm_backend == "hf":
        return HFBackend(s)
    if s.llm_backend == "openai":
        return OpenAIBackend(s)
    return LlamaCppBackend(s)


def get_backend(settings: Settings | None = None) -> Backend:
    """The backend for the settings, loaded once (a missing model fails here, at startup)."""
    s = settings or get_settings()
    key = (s.llm_backend, *(getattr(s, f) for f in _KEY_FIELDS[s.llm_backend]))
    with _lock:
        if key not in _loaded:
            _loaded[key] = _load(s)
        return _loaded[key]
