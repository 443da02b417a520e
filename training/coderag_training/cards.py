"""Model cards (issue 44): every trainer of ``coderag_training.fit`` writes one beside the model
it fits, through ``write_card`` here; ``coderag.fitted`` defines the format and reads it (the
services check a shipped model against its card's sha256 when they load it).

A card records what a model was fitted on (each input file and its sha256, the code bases, the
question counts), how (the command, steps, wall time, the loss as it fell), what it scores on
questions the fit never read, and the model file's own sha256.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from coderag.fitted import Card, card_path, read_card, sha256_file
from coderag_training.pins import ROOT, relative


def commit() -> str:
    """The repository's current commit, "+dirty" when files differ from it ("" outside a
    checkout): which trainer's code fitted the model."""
    git = ["git", "-C", str(ROOT)]
    try:
        head = subprocess.run(
            [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+dirty" if dirty else "")


def hashes(inputs: Iterable[Path]) -> dict[str, str]:
    """Each input file (a folder: each file under it) by its path as a card records it, with
    its sha256."""
    out: dict[str, str] = {}
    for path in inputs:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            out[relative(file)] = sha256_file(file)
    return dict(sorted(out.items()))


def now() -> str:
    """The time a card says a model was fitted (UTC, ISO 8601, to the second)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_card(
    model: Path,
    *,
    command: str,
    inputs: Iterable[Path] | Mapping[str, str],
    code_bases: Iterable[str],
    questions: Mapping[str, int],
    steps: int | None,
    seconds: float | None,
    loss: Sequence[float] = (),
    held_out: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    notes: str = "",
    fitted: str | None = None,
    code: str | None = None,
) -> Card:
    """Write the card of the model file ``model`` (fitted just now unless ``fitted`` says when,
    by the current checkout unless ``code`` names the commit) and return it. ``inputs`` are the
    files it was fitted on, or their ``hashes`` taken when the fit read them."""
    card = Card(
        model=model.name,
        sha256=sha256_file(model),
        command=command,
        inputs=dict(inputs) if isinstance(inputs, Mapping) else hashes(inputs),
        code_bases=tuple(sorted(set(code_bases))),
        questions=dict(questions),
        steps=steps,
        seconds=None if seconds is None else round(seconds, 1),
        loss=tuple(round(float(x), 6) for x in loss),
        held_out=dict(held_out or {}),
        fitted=fitted or now(),
        commit=commit() if code is None else code,
        notes=notes,
        extra=dict(extra or {}),
    )
    card_path(model).write_text(card.to_json(), encoding="utf-8")
    return card


def amend(model: Path, command: str, extra: Mapping[str, Any]) -> Card:
    """After a step that rewrites part of a fitted model in place (the refusal rule's doubt
    floor): its card with the new sha256, the step's command added and ``extra`` merged."""
    card = read_card(model)
    if card is None:
        raise SystemExit(f"{model} has no card: fit it with its trainer first")
    card = replace(
        card,
        sha256=sha256_file(model),
        command=f"{card.command} && {command}",
        extra={**card.extra, **extra},
    )
    card_path(model).write_text(card.to_json(), encoding="utf-8")
    return card
