"""Answer backends, chosen by ``CODERAG_LLM_BACKEND``."""

from __future__ import annotations

import threading

from coderag.settings import Settings, get_settings

from coderag_generator.backends.base import Backend, Prompt

__all__ = ["Backend", "Prompt", "get_backend"]

_loaded: dict[tuple, Backend] = {}
_lock = threading.Lock()


def get_backend(settings: Settings | None = None) -> Backend:
    """The backend for the settings, loaded once (a missing model fails here, at startup)."""
    s = settings or get_settings()
    key = (s.llm_backend, s.llm_model_path, s.llm_context, s.llm_threads, s.llm_gpu_layers)
    with _lock:
        if key not in _loaded:
            if s.llm_backend == "extractive":
                from coderag_generator.backends.extractive import ExtractiveBackend

                _loaded[key] = ExtractiveBackend()
            else:
                from coderag_generator.backends.llamacpp import LlamaCppBackend

                _loaded[key] = LlamaCppBackend(s)
        return _loaded[key]
