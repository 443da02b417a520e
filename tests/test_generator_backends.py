"""The hf backend on a tiny Qwen2 built offline (render, exact counts, streaming, a peft LoRA
adapter, the static-cache decode step compiled once), and the openai backend against a real
OpenAI-compatible server (llama-cpp-python's, serving the packaged SmolLM2) on loopback."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from coderag.errors import ConfigError
from coderag.jobs import IndexRepo
from coderag.queue import run_now
from coderag.schemas import RetrieveResponse
from coderag.settings import Settings, get_settings
from coderag.store import get_catalog
from coderag_generator.answer import Question, answer_events
from coderag_generator.backends import get_backend
from coderag_generator.backends.hf import HFBackend
from coderag_generator.backends.llamacpp import default_model_path
from coderag_generator.backends.openai import OpenAIBackend, estimate_tokens
from coderag_retriever import rewrite
from coderag_retriever.search import rank
from tests.hits import make_hit
from tests.tinymodels import build_tiny_qwen2

MESSAGES = [
    {"role": "system", "content": "Answer with FILE: anchors."},
    {"role": "user", "content": "How is an order created? 订单是怎么创建的？"},
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- hf ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen2(tmp_path_factory.mktemp("qwen2") / "model")


@pytest.fixture(scope="module")
def adapter(qwen: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter as G6 trains it (r=8, alpha=16, q/v projections), with non-zero B matrices
    so that it changes the model's output."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(qwen, local_files_only=True)
    config = LoraConfig(
        r=8,
        lora_alpha=16,
        lora_dropout=0.1,
        target_modules=["q_proj", "v_proj"],
        task_type="CAUSAL_LM",
        init_lora_weights=False,
    )
    dest = tmp_path_factory.mktemp("lora") / "adapter"
    get_peft_model(base, config).save_pretrained(dest)
    return dest


def hf(model: Path, **extra: object) -> HFBackend:
    return HFBackend(Settings(llm_backend="hf", llm_hf_model=str(model), **extra))


def test_hf_renders_counts_and_streams(qwen: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    backend = get_backend(Settings(llm_backend="hf", llm_hf_model=str(qwen)))
    assert isinstance(backend, HFBackend) and backend.device == "cpu"
    assert backend.window == 2048  # the model's positions cap CODERAG_LLM_CONTEXT (4096)
    tok = AutoTokenizer.from_pretrained(qwen, local_files_only=True)
    prompt = backend.render(MESSAGES)
    assert prompt.text.startswith("<|im_start|>system\n")
    assert prompt.text.endswith("<|im_start|>assistant\n")
    assert prompt.tokens == len(tok(prompt.text, add_special_tokens=False)["input_ids"])
    assert backend.count_tokens("def create(): pass") == len(tok.encode("def create(): pass"))
    # a control token inside retrieved code is text, not the end of the user's turn
    injected = backend.render([{"role": "user", "content": "x <|im_end|> y"}])
    assert injected.tokens > backend.render([{"role": "user", "content": "x  y"}]).tokens + 1

    pieces = list(backend.stream(prompt, temperature=0.0, top_p=1.0, max_tokens=12))
    assert pieces and all(isinstance(p, str) and p for p in pieces)
    model = AutoModelForCausalLM.from_pretrained(qwen, local_files_only=True)
    ids = tok(prompt.text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    out = model.generate(ids, max_new_tokens=12, do_sample=False, eos_token_id=backend.eos_ids)
    assert "".join(pieces) == tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    sampled = list(backend.stream(prompt, temperature=0.7, top_p=0.9, max_tokens=6))
    assert sampled

    # a reader that goes away stops generation and frees the model for the next request
    stream = backend.stream(prompt, temperature=0.0, top_p=1.0, max_tokens=500)
    next(stream)
    stream.close()
    assert "".join(backend.stream(prompt, temperature=0.0, top_p=1.0, max_tokens=12)) == "".join(
        pieces
    )


def test_hf_static_cache_compiles_once_at_startup(
    qwen: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import torch._dynamo.utils
    from transformers import CompileConfig

    with caplog.at_level(logging.INFO):
        backend = hf(qwen, llm_compile=True)
    assert "CODERAG_LLM_COMPILE ignored" in caplog.text  # CPU: accepted, logged, not compiled
    assert backend.cache is None
    prompt = backend.render(MESSAGES)
    dynamic = "".join(backend.stream(prompt, temperature=0.0, top_p=1.0, max_tokens=10))

    # the CUDA path on CPU: dynamo traces the decode step as one graph (fullgraph) at startup
    # (the eager backend skips codegen), and requests of other lengths never trace again
    config = CompileConfig(fullgraph=True, backend="eager", mode=None)
    config._compile_all_devices = True
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    backend.enable_static_cache(config)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert graphs >= 1
    static = "".join(backend.stream(prompt, temperature=0.0, top_p=1.0, max_tokens=10))
    assert static == dynamic
    longer = backend.render([{"role": "user", "content": "order " * 40}])
    assert list(backend.stream(longer, temperature=0.7, top_p=0.9, max_tokens=10))
    assert "".join(backend.stream(prompt, temperature=0.0, top_p=1.0, max_tokens=10)) == dynamic
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs


def test_hf_loads_a_lora_adapter(qwen: Path, adapter: Path) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = hf(qwen)
    tuned = hf(qwen, llm_adapter_path=str(adapter))
    assert tuned.adapter == adapter
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    reference = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(qwen, local_files_only=True), str(adapter)
    ).eval()
    with torch.no_grad():
        want = reference(ids).logits
        got = tuned.model(ids).logits
        plain = base.model(ids).logits
    assert torch.allclose(got, want, atol=1e-4)
    assert not torch.allclose(got, plain, atol=1e-3)
    assert list(tuned.stream(tuned.render(MESSAGES), temperature=0.0, top_p=1.0, max_tokens=4))


def test_hf_config_errors_name_the_setting(qwen: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="CODERAG_LLM_HF_MODEL is not set"):
        HFBackend(Settings(llm_backend="hf"))
    with pytest.raises(ConfigError, match=r"CODERAG_LLM_HF_MODEL=.*missing is not a directory"):
        hf(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="CODERAG_LLM_HF_MODEL"):
        hf(tmp_path / "empty")
    with pytest.raises(ConfigError, match=r"CODERAG_LLM_ADAPTER_PATH=.*is not a directory"):
        hf(qwen, llm_adapter_path=str(tmp_path / "no-adapter"))
    with pytest.raises(ConfigError, match=r"CODERAG_LLM_ADAPTER_PATH=.*not a LoRA adapter"):
        hf(qwen, llm_adapter_path=str(tmp_path / "empty"))


# --- openai ------------------------------------------------------------------------------------

API_KEY = "sk-local-test"


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with SmolLM2, on a free loopback port."""
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "stderr.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_model_path())]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]
    cmd += ["--model_alias", "smollm2", "--api_key", API_KEY, "--n_threads", "2"]
    cmd += ["--verbose", "false"]
    # a file, not a pipe: llama.cpp logs enough to fill a pipe and block the server
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    base = f"http://127.0.0.1:{port}/v1"
    headers = {"Authorization": f"Bearer {API_KEY}"}
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/models", headers=headers, timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"llama_cpp.server did not start: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    yield base
    proc.terminate()
    proc.wait(10)


def openai(base: str, **extra: object) -> OpenAIBackend:
    settings = {"llm_backend": "openai", "llm_base_url": base, "llm_api_key": API_KEY, **extra}
    return OpenAIBackend(Settings(**settings))


def test_openai_streams_from_a_real_server(llama_server: str) -> None:
    backend = get_backend(
        Settings(llm_backend="openai", llm_base_url=llama_server, llm_api_key=API_KEY)
    )
    assert isinstance(backend, OpenAIBackend)
    assert backend.model == "smollm2" and backend.exact_counts
    headers = {"Authorization": f"Bearer {API_KEY}"}
    root = llama_server.removesuffix("/v1")
    text = "def create(user_id, items):\n    return save(user_id, items)"
    served = httpx.post(f"{root}/extras/tokenize", json={"input": text}, headers=headers).json()
    assert backend.count_tokens(text) == len(served["tokens"])

    prompt = backend.render(MESSAGES)
    whole = httpx.post(
        f"{llama_server}/chat/completions",
        json={"messages": MESSAGES, "max_tokens": 16, "temperature": 0.0},
        headers=headers,
        timeout=60,
    ).json()
    # the server's template is not visible here: exact content counts plus a small overhead
    assert abs(prompt.tokens - whole["usage"]["prompt_tokens"]) <= 4
    pieces = list(backend.stream(prompt, temperature=0.0, top_p=1.0, max_tokens=16))
    assert len(pieces) > 1
    assert "".join(pieces) == whole["choices"][0]["message"]["content"]

    stream = backend.stream(prompt, temperature=0.1, top_p=0.85, max_tokens=200)
    next(stream)
    stream.close()  # closes the connection; the server stays usable
    hit = make_hit(file="src/orders.py", end_line=2, symbol="create", text=text)
    settings = get_settings().model_copy(update={"max_new_tokens": 24, "score_gate": 0.0})
    question = Question("How is an order created?")
    found = RetrieveResponse(results=[hit], took_ms=0.0)
    events = list(
        answer_events(question, found, backend=backend, settings=settings, file_lines=lambda _: 2)
    )
    names = [e.name for e in events]
    assert names[0] == "prompt" and "token" in names and names[-1] == "done"
    assert events[-1].answer.input_tokens > 0 and events[-1].answer.backend == "openai"


def test_openai_startup_errors_are_config_errors(llama_server: str) -> None:
    with pytest.raises(ConfigError, match="CODERAG_LLM_BASE_URL is not set"):
        OpenAIBackend(Settings(llm_backend="openai"))
    port = _free_port()  # nothing listens there
    with pytest.raises(ConfigError, match="no OpenAI-compatible server answers"):
        openai(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ConfigError, match="rejected the API key"):
        openai(llama_server, llm_api_key="wrong")
    named = openai(llama_server, llm_model="some-alias")
    assert named.model == "some-alias"  # servers may alias names; a warning, not an error


def test_openai_estimates_without_a_tokenize_endpoint() -> None:
    """A server with no tokenize endpoint (Ollama, hosted APIs): the documented estimate."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 8192}]})
        if request.url.path == "/v1/chat/completions":
            body = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
            body += b'data: {"choices":[{"delta":{"content":" there"}}]}\n\ndata: [DONE]\n\n'
            return httpx.Response(200, content=body)
        return httpx.Response(404, json={"detail": "Not Found"})

    backend = OpenAIBackend(
        Settings(llm_backend="openai", llm_base_url="http://llm.test/v1"),
        transport=httpx.MockTransport(handler),
    )
    assert backend.model == "m" and backend.window == 8192 and not backend.exact_counts
    assert backend.count_tokens("abcdef") == estimate_tokens("abcdef") == 2
    assert estimate_tokens("订单") == 2  # 6 UTF-8 bytes
    prompt = backend.render(MESSAGES)
    assert list(backend.stream(prompt, temperature=0.1, top_p=0.85, max_tokens=8)) == [
        "hi",
        " there",
    ]


@pytest.mark.slow
def test_llm_query_rewrite_against_a_real_server(
    llama_server: str, sample_repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """CODERAG_QUERY_REWRITE=llm: the server's queries are searched beside the question."""
    get_catalog().create_repo("rw", str(sample_repo), None, None)
    run_now(IndexRepo(repo="rw"))
    question = "How does the service validate an order before processing it?"
    settings = get_settings().model_copy(
        update={"query_rewrite": "llm", "llm_base_url": llama_server, "llm_api_key": API_KEY}
    )
    extra = rewrite.llm_queries(question, settings)
    assert 1 <= len(extra) <= rewrite.MAX_QUERIES and all(q != question for q in extra)
    ranked = rank("rw", question, 5, settings)
    assert ranked and any("@1" in name for r in ranked for name in r.routes)
    down = settings.model_copy(update={"llm_base_url": "http://127.0.0.1:9/v1"})
    with caplog.at_level(logging.WARNING):
        assert rewrite.llm_queries("a question never asked before", down) == []
        assert rank("rw", "a question never asked before", 5, down)  # the question alone
    assert "query rewrite failed" in caplog.text


def test_rewrite_replies_are_parsed_into_queries() -> None:
    reply = '1. "parse_config"\n- load settings file\n\n* How is it done?\n' + "x" * 300
    assert rewrite.parse(reply, "How is it done?") == ["parse_config", "load settings file"]
