"""Fitted models shipped as JSON (the refusal and unsafe rules; the learned ranker's format is
the same kind), read one way: ``load`` parses a model file into ``Fields``, whose accessors name
the file and key that is wrong, and checks it against its card when one lies beside it;
``sigmoid`` turns a rule's score into its probability.

A card (``<model>.card.json``, ``Card``) records what a model was fitted on and how: its inputs
and their sha256, code bases, question counts, steps, time, loss curve, held-out figures, the
command, and the model file's own sha256, which is why it is a file beside the model rather than
a key inside it. ``coderag_training.cards`` writes cards; nothing here fits anything.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from coderag.errors import ConfigError

CARD_SUFFIX = ".card.json"
"""What replaces a model file's suffix in its card's name."""

CARD_VERSION = 1
"""The card format written now; a reader refuses a card of another version."""

_SHA256 = re.compile(r"[0-9a-f]{64}")


class FittedModelError(ConfigError):
    """A shipped model file or its card cannot be read, or the two disagree."""


def sigmoid(z: float) -> float:
    """The logistic function of a rule's score, for any finite score."""
    if z < -700.0:
        # exp(-z) would overflow a float; 1 / (1 + e^-z) equals e^z to double precision there
        return math.exp(z)
    return 1.0 / (1.0 + math.exp(-z))


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of some bytes."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def card_path(model: Path) -> Path:
    """Where the card of the model file ``model`` lies: ``unsafe.json`` -> ``unsafe.card.json``,
    ``reranker.safetensors`` -> ``reranker.card.json``."""
    return model.with_suffix(CARD_SUFFIX)


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_REQUIRED = object()


@dataclass(frozen=True)
class Fields:
    """A model file's JSON object, read key by key; a missing or mistyped key raises a
    ``FittedModelError`` naming the file and the key."""

    path: Path
    raw: Mapping[str, Any]

    def _get(self, key: str, default: object) -> object:
        if key in self.raw:
            return self.raw[key]
        if default is _REQUIRED:
            raise FittedModelError(f"{self.path}: no {key!r} (keys: {', '.join(self.raw)})")
        return default

    def _wrong(self, key: str, wanted: str, value: object) -> FittedModelError:
        return FittedModelError(f"{self.path}: {key!r} must be {wanted}, not {_kind(value)}")

    def text(self, key: str, default: str | None = None) -> str:
        """A string; ``default`` when the key is absent (required when it is None)."""
        value = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(value, str):
            raise self._wrong(key, "a string", value)
        return value

    def number(self, key: str, default: float | None = None) -> float:
        """A number; ``default`` when the key is absent (required when it is None)."""
        value = self._get(key, _REQUIRED if default is None else default)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise self._wrong(key, "a number", value)
        return float(value)

    def optional_number(self, key: str) -> float | None:
        """A number, or None when the key is absent or null."""
        value = self._get(key, None)
        return None if value is None else self.number(key)

    def flag(self, key: str, default: bool) -> bool:
        """A boolean; ``default`` when the key is absent."""
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self._wrong(key, "true or false", value)
        return value

    def numbers(self, key: str) -> tuple[float, ...]:
        """A list of numbers (required)."""
        value = self._get(key, _REQUIRED)
        if not isinstance(value, list) or not all(_is_number(v) for v in value):
            raise self._wrong(key, "a list of numbers", value)
        return tuple(float(v) for v in value)

    def texts(self, key: str) -> tuple[str, ...]:
        """A list of strings (required)."""
        value = self._get(key, _REQUIRED)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._wrong(key, "a list of strings", value)
        return tuple(value)


def _object(data: bytes, path: Path, what: str) -> dict[str, Any]:
    """The JSON object in ``data``, or a FittedModelError saying why it is not one."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FittedModelError(f"{path}: the {what} is not JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise FittedModelError(f"{path}: the {what} must be a JSON object, not {_kind(raw)}")
    return raw


def parse(data: str | bytes, where: Path) -> Fields:
    """A model's JSON read from ``data`` (named ``where`` in errors), without its card: for a
    model held in memory; ``load`` reads a file and checks its card."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return Fields(where, _object(raw, where, "model file"))


def load(path: Path) -> Fields | None:
    """The model file at ``path`` (None when there is none), checked against its card when one
    lies beside it: a model whose bytes are not the ones its card describes is refused."""
    if not path.is_file():
        return None
    data = path.read_bytes()
    card = read_card(path)
    if card is not None and card.sha256 != sha256_bytes(data):
        raise FittedModelError(
            f"{path}: sha256 {sha256_bytes(data)} is not the {card.sha256} of its card "
            f"{card_path(path).name}: refit it ({card.command}) or restore the file"
        )
    return parse(data, path)


def dump(path: Path, model: Mapping[str, Any]) -> None:
    """Write a model file as every shipped one is written (one-space indent, a final newline)."""
    path.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class Card:
    """What a fitted model was made from and how (the file ``card_path(model)``)."""

    model: str
    """The model file's name; the card lies beside it."""
    sha256: str
    """The model file's sha256."""
    command: str
    """The command that fitted it, run from the repository's root."""
    inputs: dict[str, str]
    """Each file it was fitted on (relative to the repository's root) and its sha256."""
    code_bases: tuple[str, ...]
    """The code bases its questions are about."""
    questions: dict[str, int]
    """How many questions of each kind it was fitted on."""
    steps: int | None
    """Optimizer steps or iterations (None: not recorded)."""
    seconds: float | None
    """Wall time of the fit (None: not recorded)."""
    loss: tuple[float, ...]
    """The training loss as it fell (empty: not recorded)."""
    held_out: dict[str, Any]
    """Figures on questions the fit never read, and where they come from."""
    fitted: str
    """When it was fitted (ISO 8601), or the commit that shipped it when that is all we know."""
    commit: str = ""
    """The repository's commit the trainer ran at ("" unknown)."""
    notes: str = ""
    """Anything a reader of the figures should know (a card written after the fit, say)."""
    card: int = CARD_VERSION
    """The card format."""
    extra: dict[str, Any] = field(default_factory=dict)
    """The trainer's own facts (regularisation, threshold rule, base model, ...)."""

    def to_json(self) -> str:
        """The card as written beside its model."""
        return json.dumps(asdict(self), indent=1, ensure_ascii=False) + "\n"


_CARD_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "sha256": (str,),
    "command": (str,),
    "inputs": (dict,),
    "code_bases": (list,),
    "questions": (dict,),
    "steps": (int, type(None)),
    "seconds": (int, float, type(None)),
    "loss": (list,),
    "held_out": (dict,),
    "fitted": (str,),
    "commit": (str,),
    "notes": (str,),
    "card": (int,),
    "extra": (dict,),
}


def parse_card(raw: Mapping[str, Any], where: Path) -> Card:
    """A card from its JSON object; a missing, unknown or mistyped key raises a
    ``FittedModelError`` naming ``where`` and the key."""
    names = [f.name for f in fields(Card)]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise FittedModelError(f"{where}: unknown card keys {unknown}")
    optional = {"commit", "notes", "card", "extra"}
    missing = [n for n in names if n not in raw and n not in optional]
    if missing:
        raise FittedModelError(f"{where}: the card lacks {missing}")
    for name, kinds in _CARD_TYPES.items():
        # bool is an int to isinstance, and no card key is a boolean
        if name in raw and (not isinstance(raw[name], kinds) or isinstance(raw[name], bool)):
            raise FittedModelError(f"{where}: card key {name!r} is {_kind(raw[name])}")
    if raw.get("card", CARD_VERSION) != CARD_VERSION:
        raise FittedModelError(f"{where}: card format {raw['card']}, this reader knows 1")
    digests = [raw["sha256"], *raw["inputs"].values()]
    if not all(isinstance(d, str) and _SHA256.fullmatch(d) for d in digests):
        raise FittedModelError(f"{where}: a sha256 of the card is not 64 hex digits")
    if not all(_is_number(x) for x in raw["loss"]):
        raise FittedModelError(f"{where}: card key 'loss' must be a list of numbers")
    counts = raw["questions"].values()
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in counts):
        raise FittedModelError(f"{where}: card key 'questions' must map names to counts")
    return Card(
        **{
            **raw,
            "code_bases": tuple(str(c) for c in raw["code_bases"]),
            "loss": tuple(float(x) for x in raw["loss"]),
            "questions": dict(raw["questions"]),
        }
    )


def read_card(model: Path) -> Card | None:
    """The card of the model file ``model`` (None when it has none)."""
    path = card_path(model)
    if not path.is_file():
        return None
    card = parse_card(_object(path.read_bytes(), path, "card"), path)
    if card.model != model.name:
        raise FittedModelError(f"{path}: the card describes {card.model}, not {model.name}")
    return card


def verify(model: Path) -> Card:
    """The card of ``model``, after checking that the file is the one it describes; raises a
    ``FittedModelError`` when the card is missing or the sha256 differs."""
    card = read_card(model)
    if card is None:
        raise FittedModelError(f"{model}: no card ({card_path(model).name})")
    actual = sha256_file(model)
    if actual != card.sha256:
        raise FittedModelError(f"{model}: sha256 {actual} is not its card's {card.sha256}")
    return card
