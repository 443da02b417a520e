"""llama.cpp's conversion tools for LoRA adapters: ``convert_lora_to_gguf.py`` and its packages,
taken from the source distribution of the installed llama-cpp-python (cached once), and greedy
answers through llama.cpp to measure a converted adapter on the CPU serving path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from coderag.settings import get_settings
from coderag_generator.samples import Sample

LLAMA_CPP_PYTHON = "0.3.36"
"""llama-cpp-python whose vendored llama.cpp converts the adapter (the installed one wins)."""

TOOLS_ENV = "CODERAG_LLAMA_CPP_TOOLS"
"""Environment variable naming the cache directory of the llama.cpp conversion scripts."""

TOOL_PATHS = ("convert_lora_to_gguf.py", "convert_hf_to_gguf.py", "conversion/", "gguf-py/")
"""What is taken from ``vendor/llama.cpp/`` of the source distribution."""


class ConversionError(RuntimeError):
    """The llama.cpp converter could not be fetched or failed."""


def llama_cpp_version() -> str:
    """The installed llama-cpp-python's version (the GGUF format its llama.cpp reads)."""
    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        return LLAMA_CPP_PYTHON


def default_tools_dir() -> Path:
    """Where the conversion scripts are cached: ``$CODERAG_LLAMA_CPP_TOOLS`` or ~/.cache."""
    env = os.environ.get(TOOLS_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "coderag" / f"llama.cpp-{llama_cpp_version()}"


def _wanted(rel: str) -> bool:
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in TOOL_PATHS)


def llama_cpp_tools(dest: Path | None = None) -> Path:
    """A directory with llama.cpp's ``convert_lora_to_gguf.py``, ``convert_hf_to_gguf.py`` and
    their ``conversion`` and ``gguf-py`` packages, from llama-cpp-python's sdist (cached)."""
    dest = dest or default_tools_dir()
    if all((dest / p).exists() for p in TOOL_PATHS):
        return dest
    ver = llama_cpp_version()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        cmd += [f"llama-cpp-python=={ver}", "-d", tmp, "-q"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        archives = list(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        if proc.returncode or not archives:
            raise ConversionError(
                f"could not download the llama-cpp-python {ver} sdist: {proc.stderr[-1500:]}"
            )
        staging = Path(tmp) / "tools"
        prefix = f"llama_cpp_python-{ver}/vendor/llama.cpp/"
        with tarfile.open(archives[0]) as tar:
            members = []
            for m in tar.getmembers():
                rel = m.name[len(prefix) :] if m.name.startswith(prefix) else ""
                if rel and (m.isfile() or m.isdir()) and _wanted(rel):
                    m.name = rel
                    members.append(m)
            tar.extractall(staging, members=members, filter="data")
        if not all((staging / p).exists() for p in TOOL_PATHS):
            raise ConversionError(f"the llama-cpp-python {ver} sdist lacks {TOOL_PATHS}")
        if dest.exists():
            shutil.rmtree(dest)
        staging.rename(dest)
    return dest


def convert_adapter(
    adapter: Path, base: Path, out_file: Path, tools: Path | None = None, outtype: str = "f32"
) -> Path:
    """Convert a peft LoRA directory to a GGUF LoRA (the base model's config.json is read)."""
    tools = llama_cpp_tools(tools)
    cmd = [sys.executable, str(tools / "convert_lora_to_gguf.py"), "--base", str(base)]
    cmd += ["--outfile", str(out_file), "--outtype", outtype, str(adapter)]
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}  # use the vendored gguf
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode or not out_file.is_file():
        raise ConversionError(f"convert_lora_to_gguf.py failed: {proc.stderr[-2000:]}")
    return out_file


def llama_cpp_answers(
    model_path: Path,
    samples: Sequence[Sample],
    *,
    lora: Path | None = None,
    max_new_tokens: int = 96,
    n_ctx: int = 4096,
) -> list[str]:
    """Greedy answers from llama.cpp (the CPU serving path): a GGUF model, optionally with a
    GGUF LoRA on top, prompted through the GGUF's own chat template."""
    from llama_cpp import Llama

    llm = Llama(
        model_path=str(model_path),
        lora_path=str(lora) if lora else None,
        n_ctx=n_ctx,
        n_threads=get_settings().llm_threads or os.cpu_count() or 1,
        verbose=False,
    )
    try:
        answers = []
        for s in samples:
            reply = llm.create_chat_completion(
                messages=s.messages(),
                temperature=0.0,
                max_tokens=max_new_tokens,
            )
            message: Any = reply["choices"][0]["message"]
            answers.append((message["content"] or "").strip())
        return answers
    finally:
        llm.close()
