"""The refusal rules as data: ``prompts/refusal_rules_<lang>.txt`` (TOML) compiled once per
language; ``coderag_generator.refusal`` applies them."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from coderag_generator import prompts


@dataclass(frozen=True)
class Judgement:
    """A vague judgement word and the dimensions a clarifying answer offers."""

    pattern: re.Pattern[str]
    dimensions: str


@dataclass(frozen=True)
class Rules:
    """The compiled rules of one language file."""

    window: int
    ask: tuple[re.Pattern[str], ...]
    defense: tuple[re.Pattern[str], ...]
    strong: tuple[re.Pattern[str], ...]
    weak: tuple[re.Pattern[str], ...]
    check: tuple[re.Pattern[str], ...]
    asset: tuple[re.Pattern[str], ...]
    alone: tuple[re.Pattern[str], ...]
    disclose: tuple[re.Pattern[str], ...]
    value: tuple[re.Pattern[str], ...]
    disclose_window: int
    ordinary: tuple[re.Pattern[str], ...]
    purpose: tuple[re.Pattern[str], ...]
    wish: tuple[re.Pattern[str], ...]
    dimension: tuple[re.Pattern[str], ...]
    filler: tuple[re.Pattern[str], ...]
    judgements: tuple[Judgement, ...]


def _compile(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


@cache
def rules(lang: str) -> Rules:
    """The rules of ``prompts/refusal_rules_<lang>.txt``."""
    path = resources.files("coderag_generator").joinpath(f"prompts/refusal_rules_{lang}.txt")
    data: dict[str, Any] = tomllib.loads(path.read_text("utf-8"))
    unsafe, vague = data["unsafe"], data["vague"]
    return Rules(
        window=int(unsafe["window"]),
        ask=_compile(unsafe["ask"]),
        defense=_compile(unsafe["defense"]),
        strong=_compile(unsafe["strong"]),
        weak=_compile(unsafe["weak"]),
        check=_compile(unsafe["check"]),
        asset=_compile(unsafe["asset"]),
        alone=_compile(unsafe.get("alone", [])),
        disclose=_compile(unsafe.get("disclose", [])),
        value=_compile(unsafe.get("value", [])),
        disclose_window=int(unsafe.get("disclose_window", unsafe["window"])),
        ordinary=_compile(unsafe.get("ordinary", [])),
        purpose=_compile(unsafe.get("purpose", [])),
        wish=_compile(unsafe.get("wish", [])),
        dimension=_compile(vague["dimension"]),
        filler=_compile(vague["filler"]),
        judgements=tuple(
            Judgement(re.compile(j["pattern"], re.IGNORECASE), j["dimensions"])
            for j in vague["judgement"]
        ),
    )


def all_rules() -> list[Rules]:
    """The rules of every language."""
    return [rules(lang) for lang in prompts.LANGUAGES]
