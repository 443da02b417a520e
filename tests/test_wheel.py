"""The project as a team installs it: a wheel built from the checkout, installed non-editable into a
throwaway virtualenv, imports every module it holds and serves ``/health`` (issue 46: a hand-kept
package list once left ``coderag_app.v1`` out of every wheel while editable installs worked)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.liveserver import ROOT, free_port

SOURCE_DIRS = (
    "shared",
    "services/parser",
    "services/embedder",
    "services/retriever",
    "services/generator",
    "app",
    "training",
)
"""Where the packages live in the checkout (pyproject.toml's packages.find)."""

# every module the wheel holds, imported by a python that cannot see the checkout; the migrations
# import `alembic.op`, which only works inside Alembic's own runner, so they are checked as files
IMPORT_ALL = """
import importlib, sys, zipfile
names = [n[:-3].replace("/", ".").removesuffix(".__init__")
         for n in zipfile.ZipFile(sys.argv[1]).namelist()
         if n.endswith(".py") and ".store.migrations" not in n.replace("/", ".")]
for name in names:
    module = importlib.import_module(name)
    assert module.__file__.startswith(sys.prefix), (name, module.__file__)
print(len(names))
"""


def wheel_modules(wheel: Path) -> set[str]:
    """The ``.py`` files of a wheel, as paths inside it."""
    return {n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".py")}


def tree_modules() -> set[str]:
    """The ``.py`` files under the checkout's package folders, as paths inside a wheel."""
    found: set[str] = set()
    for folder in SOURCE_DIRS:
        base = ROOT / folder
        for path in base.glob("coderag*/**/*.py"):
            found.add(path.relative_to(base).as_posix())
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(wheel, virtualenv): the checkout built into a wheel and installed there without network;
    the dependencies come from this environment's site-packages, read after the wheel's own."""
    work = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(work / "dist"),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = (work / "dist").glob("coderag-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # a plain path line: the dependencies' .pth files are not run, so the editable finder that
    # maps `coderag*` to the checkout in this environment never loads there
    Path(purelib, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            # this environment's editable coderag is visible through deps.pth: without it pip
            # may call the wheel "already satisfied" and install nothing
            "--force-reinstall",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    yield wheel, venv


def clean_env(data_dir: Path) -> dict[str, str]:
    """An environment that names no checkout folder: no PYTHONPATH, no CODERAG_ settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CODERAG_", "REDIS_URL", "PYTHONPATH"))
    }
    env["CODERAG_DATA_DIR"] = str(data_dir)
    return env


def test_wheel_holds_every_module_of_the_tree(installed: tuple[Path, Path]) -> None:
    """A module added under a package folder is in the wheel without editing pyproject.toml."""
    wheel, _ = installed
    missing = tree_modules() - wheel_modules(wheel)
    assert not missing, f"modules missing from the wheel: {sorted(missing)}"
    assert "coderag_app/v1/errors.py" in wheel_modules(wheel)


def test_wheel_holds_the_shipped_models_with_their_cards(installed: tuple[Path, Path]) -> None:
    """The fitted models the services load (the unsafe reader's adapter beside the embedder,
    the rules beside the retriever) travel in the wheel, each with its card."""
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for model in (
        "coderag_embedder/unsafe_adapter.safetensors",
        "coderag_retriever/unsafe.json",
        "coderag_retriever/unsafe_tuned.json",
        "coderag_retriever/ranker.json",
    ):
        assert model in names, model
        assert model.rsplit(".", 1)[0] + ".card.json" in names, model


def test_wheel_imports_every_module_outside_the_checkout(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    """Every module of the installed wheel imports from the virtualenv, not from the checkout."""
    wheel, venv = installed
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", IMPORT_ALL, str(wheel)],
        cwd=tmp_path,
        env=clean_env(tmp_path / "data"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) >= 100


def test_installed_server_answers_health(installed: tuple[Path, Path], tmp_path: Path) -> None:
    """The wheel's ``coderag serve`` console script comes up to a healthy ``/health``."""
    _, venv = installed
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(venv / "bin" / "coderag"), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=tmp_path,
            env=clean_env(tmp_path / "data"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 180
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code
            except httpx.HTTPError:
                status = None
            if status == 200:
                break
            time.sleep(0.3)
        assert status == 200, log.read_text()[-3000:]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
