"""Fetch the pinned benchmark corpora into ``bench/.cache/``.

Each entry of ``bench/corpora.json`` names a real code base pinned by version and by the
sha256 of its downloaded archive:

* ``kind: "pypi"``: a source archive downloaded with
  ``python3 -m pip download --no-deps --no-binary :all: PACKAGE==VERSION``;
* ``kind: "debian"``: a ``.deb`` downloaded with ``apt-get download PACKAGE=VERSION`` and
  unpacked with ``dpkg-deb -x``;
* ``kind: "npm"``: a package tarball downloaded with ``npm pack PACKAGE@VERSION`` (its files
  sit under ``package/``, so ``root`` usually starts with ``package/``).

Archives land in ``bench/.cache/archives/``, are verified against the pinned sha256 (a
mismatch is an error, never silently accepted) and are extracted into
``bench/.cache/src/<name>-<version>/``. Work already done is skipped.

Usage::

    python -m bench.fetch [NAME ...]    # prints the absolute root of each corpus

    python -m bench.fetch --mining      # every code base of ``bench/mining.json``

    python -m bench.fetch --written     # every code base of ``bench/written/*.json``

``bench/mining.json`` pins, in the same format, the code bases that training questions are mined
from (``split: "mined"``, in neither split); :func:`load_corpora` never returns them, so nothing
that iterates the splits sees them, but :func:`get_corpus` and :func:`corpus_root` find them by
name.

Other bench scripts import :func:`corpus_root` and :func:`load_corpora`; the lists themselves
are read by ``coderag_training.pins`` (the trainers read them too, and may not import bench).
"""

from __future__ import annotations

import hashlib
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

# the lists are read where the trainers read them; re-exported for the benchmarks that import them
from coderag_training.pins import CORPORA_FILE as CORPORA_FILE
from coderag_training.pins import KINDS as KINDS
from coderag_training.pins import MINING_FILE as MINING_FILE
from coderag_training.pins import REQUIRED_KEYS as REQUIRED_KEYS
from coderag_training.pins import WRITTEN_DIR as WRITTEN_DIR
from coderag_training.pins import PinError as FetchError
from coderag_training.pins import get_corpus, load_corpora, load_mining, load_written

BENCH_DIR = pathlib.Path(__file__).resolve().parent
CACHE_DIR = BENCH_DIR / ".cache"
ARCHIVE_DIR = CACHE_DIR / "archives"
SRC_DIR = CACHE_DIR / "src"

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".zip", ".deb")


def sha256_of(path: pathlib.Path) -> str:
    """Return the hex sha256 digest of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def archive_suffix(filename: str) -> str:
    """Return the archive suffix of ``filename`` (e.g. ``.tar.gz``) or raise FetchError."""
    for suffix in ARCHIVE_SUFFIXES:
        if filename.endswith(suffix):
            return suffix
    raise FetchError(f"unsupported archive type: {filename}")


def cached_archive(entry: dict) -> pathlib.Path | None:
    """Return the already downloaded archive of ``entry``, if any."""
    stem = f"{entry['name']}-{entry['version']}"
    for suffix in ARCHIVE_SUFFIXES:
        candidate = ARCHIVE_DIR / f"{stem}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def run_download(entry: dict, workdir: pathlib.Path) -> None:
    """Download the archive of ``entry`` into the empty directory ``workdir``."""
    if entry["kind"] == "pypi":
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"{entry['package']}=={entry['version']}",
            "-d",
            str(workdir),
        ]
    elif entry["kind"] == "npm":
        # --ignore-scripts: packing a registry tarball must never run the package's hooks
        cmd = ["npm", "pack", "--ignore-scripts", f"{entry['package']}@{entry['version']}"]
    else:
        cmd = ["apt-get", "download", f"{entry['package']}={entry['version']}"]
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise FetchError(
            f"{entry['name']}: `{' '.join(cmd)}` failed ({result.returncode}):\n"
            f"{result.stdout}{result.stderr}"
        )


def download(entry: dict) -> pathlib.Path:
    """Download the archive of ``entry`` into the cache (unless present) and return its path."""
    existing = cached_archive(entry)
    if existing is not None:
        return existing
    ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE_DIR, prefix="download-") as tmp:
        workdir = pathlib.Path(tmp)
        workdir.chmod(0o777)  # apt-get download drops privileges to the _apt user
        run_download(entry, workdir)
        files = [path for path in workdir.iterdir() if path.is_file()]
        if len(files) != 1:
            names = [path.name for path in files]
            raise FetchError(f"{entry['name']}: expected one downloaded file, got {names}")
        target = ARCHIVE_DIR / f"{entry['name']}-{entry['version']}{archive_suffix(files[0].name)}"
        shutil.move(str(files[0]), target)
    return target


def verify(entry: dict, archive: pathlib.Path) -> None:
    """Raise FetchError unless ``archive`` has the sha256 pinned for ``entry``."""
    actual = sha256_of(archive)
    if actual != entry["sha256"]:
        raise FetchError(
            f"{entry['name']}: sha256 mismatch for {archive}\n"
            f"  expected {entry['sha256']}\n  actual   {actual}\n"
            "Delete the file to download it again, or fix the pin in bench/corpora.json "
            "or bench/mining.json."
        )


def unpack(archive: pathlib.Path, dest: pathlib.Path) -> None:
    """Extract ``archive`` into the existing directory ``dest``."""
    name = archive.name
    if name.endswith(".deb"):
        result = subprocess.run(
            ["dpkg-deb", "-x", str(archive), str(dest)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise FetchError(f"dpkg-deb -x {archive} failed:\n{result.stderr}")
    elif name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
    else:
        with tarfile.open(archive) as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, filter="data")
            else:
                tf.extractall(dest)


def extracted_dir(entry: dict) -> pathlib.Path:
    """Return the extraction directory ``bench/.cache/src/<name>-<version>`` of ``entry``."""
    return SRC_DIR / f"{entry['name']}-{entry['version']}"


def fetch(entry: dict) -> pathlib.Path:
    """Download, verify and extract ``entry`` as needed; return its absolute corpus root."""
    dest = extracted_dir(entry)
    root = dest / entry["root"]
    if root.is_dir():
        return root.resolve()
    archive = download(entry)
    verify(entry, archive)
    SRC_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=SRC_DIR, prefix=f".{dest.name}-") as tmp:
        staging = pathlib.Path(tmp) / "x"
        staging.mkdir()
        unpack(archive, staging)
        if not (staging / entry["root"]).is_dir():
            raise FetchError(f"{entry['name']}: root {entry['root']!r} not found in {archive}")
        if dest.exists():
            shutil.rmtree(dest)
        staging.rename(dest)
    return root.resolve()


def corpus_root(name: str) -> pathlib.Path:
    """Return the absolute root directory of corpus ``name``, fetching it when needed."""
    return fetch(get_corpus(name))


def main(argv: list[str]) -> int:
    """Fetch the named corpora (all when none are named) and print their roots."""
    try:
        if argv == ["--mining"]:
            entries = load_mining()
        elif argv == ["--written"]:
            entries = load_written()
        else:
            entries = [get_corpus(name) for name in argv] if argv else load_corpora()
        for entry in entries:
            print(fetch(entry))
    except FetchError as exc:
        print(f"fetch.py: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
