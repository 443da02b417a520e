"""OpenAI-compatible HTTP backend, for teams that already run vLLM, Ollama or a llama.cpp server:
``POST {CODERAG_LLM_BASE_URL}/chat/completions`` with ``stream: true``, read as server-sent events.

Token counts. The server applies its own chat template, which this side cannot see, so
``render``'s count is the exact token count of each message's text, asked of the server's tokenize
endpoint, plus ``MESSAGE_OVERHEAD`` template tokens per message and ``REPLY_OVERHEAD`` for the
assistant header (ChatML's ``<|im_start|>role\\n…<|im_end|>\\n``). The endpoints tried, in order:
``POST /extras/tokenize`` (llama-cpp-python's server), ``POST /tokenize`` with ``content``
(llama.cpp's llama-server) and ``POST /tokenize`` with ``prompt`` (vLLM). A server with none of
them (Ollama, hosted APIs) gets the estimate of ``estimate_tokens``; ``exact_counts`` says which.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from coderag.errors import ConfigError, Unavailable
from coderag.settings import Settings
from coderag_generator.backends.base import UNGROUNDED, Grounding, Prompt

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
"""Connecting, and the startup check of ``/models``."""

READ_TIMEOUT_S = 300.0
"""Longest silence between two streamed chunks."""

MESSAGE_OVERHEAD = 5
"""Template tokens around each message (ChatML: start, role, newline, end, newline)."""

REPLY_OVERHEAD = 3
"""Template tokens that open the assistant's reply."""

PROBE_TEXT = "def probe(): return 1"
"""Text the startup check tokenizes to find a working tokenize endpoint."""


def estimate_tokens(text: str) -> int:
    """A deliberately high guess: one token per 3 UTF-8 bytes (English BPE averages ~4 characters a
    token, CJK about one character, i.e. 3 bytes), so budgets err on the short side."""
    return math.ceil(len(text.encode("utf-8")) / 3)


def _root(base: str) -> str:
    """The server root: tokenize endpoints live beside ``/v1``, not under it."""
    return base[: -len("/v1")] if base.endswith("/v1") else base


class OpenAIBackend:
    """A chat model behind an OpenAI-compatible HTTP API."""

    name = "openai"

    def __init__(self, settings: Settings, transport: httpx.BaseTransport | None = None) -> None:
        base = settings.llm_base_url.rstrip("/")
        if not base:
            raise ConfigError("CODERAG_LLM_BASE_URL is not set; give the server's …/v1 URL")
        headers = (
            {"Authorization": f"Bearer {settings.llm_api_key}"} if settings.llm_api_key else {}
        )
        self.base = base
        self.http = httpx.Client(
            base_url=base,
            transport=transport,
            headers=headers,
            timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
        )
        models = self._models()
        ids = [m.get("id") for m in models]
        if settings.llm_model:
            self.model = settings.llm_model
            if self.model not in ids:  # some servers alias any name to their one model
                log.warning("model %r is not among %s listed by %s", self.model, ids, base)
        elif ids:
            self.model = str(ids[0])
        else:
            raise ConfigError(f"{base}/models lists no model; set CODERAG_LLM_MODEL")
        entry = next((m for m in models if m.get("id") == self.model), {})
        # vLLM reports its context length; elsewhere CODERAG_LLM_CONTEXT stands in for it
        self.window = int(entry.get("max_model_len") or settings.llm_context)
        self._count = self._find_tokenizer()
        self.exact_counts = self._count is not estimate_tokens

    def _models(self) -> list[dict[str, Any]]:
        """``GET /models``: proves at startup that the server answers and the key is accepted."""
        try:
            resp = self.http.get("/models", timeout=CONNECT_TIMEOUT_S)
        except httpx.HTTPError as exc:
            raise ConfigError(
                f"no OpenAI-compatible server answers at {self.base} (CODERAG_LLM_BASE_URL): {exc}"
            ) from exc
        if resp.status_code in (401, 403):
            raise ConfigError(f"{self.base} rejected the API key (CODERAG_LLM_API_KEY)")
        if resp.status_code >= 400:
            raise ConfigError(
                f"{self.base}/models answered {resp.status_code}; is CODERAG_LLM_BASE_URL the …/v1 "
                "URL of an OpenAI-compatible server?"
            )
        try:
            return list(resp.json().get("data") or [])
        except (ValueError, AttributeError) as exc:
            raise ConfigError(f"{self.base}/models did not answer a model list") from exc

    def _find_tokenizer(self) -> Callable[[str], int]:
        """The first tokenize endpoint that counts ``PROBE_TEXT``, else ``estimate_tokens``."""
        root = _root(self.base)
        probes: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
            (f"{root}/extras/tokenize", lambda t: {"input": t}),
            (f"{root}/tokenize", lambda t: {"content": t}),
            (f"{root}/tokenize", lambda t: {"model": self.model, "prompt": t}),
        ]
        for url, body in probes:
            try:
                resp = self.http.post(url, json=body(PROBE_TEXT), timeout=CONNECT_TIMEOUT_S)
                tokens = resp.json().get("tokens") if resp.status_code == 200 else None
            except (httpx.HTTPError, ValueError, AttributeError):
                continue
            if isinstance(tokens, list) and tokens:
                log.info("openai backend: exact token counts from %s", url)
                return self._remote_counter(url, body)
        log.info("openai backend: %s has no tokenize endpoint; token counts are estimates", root)
        return estimate_tokens

    def _remote_counter(
        self, url: str, body: Callable[[str], dict[str, Any]]
    ) -> Callable[[str], int]:
        def count(text: str) -> int:
            if not text:
                return 0
            try:
                resp = self.http.post(url, json=body(text))
                resp.raise_for_status()
                return len(resp.json()["tokens"])
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                raise Unavailable(f"LLM server tokenize failed: {exc}") from exc

        return count

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text``: exact from the server's tokenizer, or the estimate (module doc)."""
        return self._count(text)

    def render(self, messages: list[dict[str, str]]) -> Prompt:
        """Count the messages; the server applies the chat template itself."""
        text = "\n".join(f"<{m['role']}>\n{m['content']}" for m in messages)
        tokens = REPLY_OVERHEAD + sum(
            self.count_tokens(m["content"]) + MESSAGE_OVERHEAD for m in messages
        )
        return Prompt(messages=messages, text=text, tokens=tokens)

    def stream(
        self,
        prompt: Prompt,
        *,
        temperature: float,
        top_p: float,
        max_tokens: int,
        grounding: Grounding = UNGROUNDED,
    ) -> Iterator[str]:
        """Stream ``/chat/completions``; closing the iterator closes the connection. ``grounding``
        is not read: the server's model sees the hits in the prompt."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": prompt.messages,
            "stream": True,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
        }
        if prompt.stop:
            body["stop"] = prompt.stop
        try:
            with self.http.stream("POST", "/chat/completions", json=body) as resp:
                if resp.status_code >= 400:
                    detail = resp.read().decode("utf-8", "replace")[:500]
                    raise Unavailable(f"LLM server answered {resp.status_code}: {detail}")
                for line in resp.iter_lines():
                    if not line.startswith("data:"):
                        continue  # blank separators, comments and event names
                    data = line[len("data:") :].strip()
                    if data == "[DONE]":
                        break
                    yield from _pieces(data)
        except httpx.HTTPError as exc:
            raise Unavailable(f"LLM server at {self.base} failed: {exc}") from exc


def _pieces(data: str) -> Iterator[str]:
    """The text of one streamed chunk (the first choice's delta)."""
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise Unavailable(f"LLM server sent a malformed event: {data[:200]}") from exc
    if chunk.get("error"):
        raise Unavailable(f"LLM server error: {chunk['error']}")
    for choice in (chunk.get("choices") or [])[:1]:
        piece = (choice.get("delta") or {}).get("content")
        if piece:
            yield piece
