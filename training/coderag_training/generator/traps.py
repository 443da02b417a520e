"""Trap samples for the generator's LoRA fine-tuning (seed 004 §3.4, G5/G6), built from the units
of an indexed repository.

Type A asks about things the code does not hold (storage it does not use, deployment, secrets) or
for something unsafe (bypassing a permission check); the target is the refusal sentence. Type B is
too vague to answer ("is this function safe?"); the target asks what is meant. Type C rests on a
premise that the unit's own facts contradict ("X both raises and exits, right?"); the target
corrects it and cites the unit. Grounded questions ("what does X do?") have a factual answer that
cites ``FILE: path:start-end`` of the unit. Every sample is a chat (system prompt, user prompt with
the unit snippets as context, assistant target) in English or Chinese, answered in its language.
Samples are split into training and held-out sets by symbol.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable, Sequence

from coderag.schemas import Unit
from coderag.store import get_catalog
from coderag_generator import prompts
from coderag_generator.context import Snippet
from coderag_generator.samples import Sample, TrapSet
from coderag_training.generator.trap_texts import (
    CRASH,
    GROUNDED,
    KIND_ZH,
    OUT_OF_SCOPE,
    PLATFORMS,
    RAISES,
    TECHS,
    VAGUE,
)

KINDS = ("A", "B", "C", "grounded")
"""Sample types: out-of-scope/unsafe, vague, contradictory premise, ordinary grounded question."""

KIND_SHARES = {"grounded": 0.4, "A": 0.25, "B": 0.15, "C": 0.2}
"""Share of each type among the generated samples."""

LANGS = ("en", "zh")
"""Question (and answer) languages, alternated sample by sample."""

ANSWERABLE_KINDS = frozenset({"function", "method", "class", "type", "interface"})
"""Unit kinds that samples are built on (file summaries and text blocks are not)."""

CALLABLE_KINDS = frozenset({"function", "method"})
"""Unit kinds whose facts (errors, calls, signature) type C premises contradict."""

MAX_SNIPPET_LINES = 24
"""Longer units are cut to their first lines in the prompt (the cited range shrinks to match)."""

_ERROR_WORDS = re.compile(
    r"err|raise|throw|panic|exception|exit|abort|fatal|unwrap|expect\(|\)\?|fail|invalid", re.I
)


def display_name(symbol: str) -> str:
    """The symbol as a question names it: ``(*Service).Save`` -> ``Service.Save``."""
    return re.sub(r"^\(\*?([^)]+)\)", r"\1", symbol)


def short_name(symbol: str) -> str:
    """The bare name of a qualified symbol."""
    return display_name(symbol).rsplit(".", 1)[-1]


def snippet(unit: Unit, max_lines: int = MAX_SNIPPET_LINES) -> Snippet:
    """The unit as a prompt snippet, cut to its first ``max_lines`` lines."""
    lines = unit.text.splitlines()[:max_lines]
    end = min(unit.end_line, unit.start_line + max(len(lines), 1) - 1)
    return Snippet(
        unit.file, unit.start_line, end, unit.symbol, unit.kind, unit.signature, "\n".join(lines)
    )


def _first_sentence(doc: str) -> str:
    text = " ".join(doc.split())
    return re.split(r"(?<=[.!?。])\s", text, maxsplit=1)[0].rstrip(".。")


def _anchor(s: Snippet) -> str:
    return f"{s.file}:{s.start_line}-{s.end_line}"


def _calls(unit: Unit) -> list[str]:
    return [c.split(" (")[0] for c in unit.facts.get("calls", [])][:4]


def _params(unit: Unit) -> str:
    sig = unit.facts.get("signature") or {}
    params = sig.get("params", "") if isinstance(sig, dict) else ""
    return params.strip() if params.strip() not in ("", "()", "(void)") else ""


def _grounded(unit: Unit, s: Snippet, lang: str, what: str) -> str:
    name, anchor = display_name(unit.symbol), _anchor(s)
    doc = _first_sentence(unit.doc)
    calls = _calls(unit)
    if lang == "zh":
        kind = KIND_ZH.get(unit.kind, unit.kind)
        if what == "where":
            lines = f"{s.start_line}-{s.end_line}"
            return f"`{name}` 定义在 {unit.file} 的第 {lines} 行。参见 FILE: {anchor}。"
        if what == "calls":
            return f"`{name}` 调用了 {'、'.join(f'`{c}`' for c in calls)}。参见 FILE: {anchor}。"
        if what == "params":
            return f"`{name}` 的参数是 `{_params(unit)}`。参见 FILE: {anchor}。"
        if doc:
            desc = f"，注释说明：{doc}"
        elif calls:
            desc = f"，它调用了 {'、'.join(f'`{c}`' for c in calls)}"
        else:
            desc = f"，声明为 `{unit.signature}`" if unit.signature else ""
        return f"`{name}` 是 {unit.file} 中的{kind}{desc}。参见 FILE: {anchor}。"
    if what == "where":
        return (
            f"`{name}` is defined in {unit.file}, lines {s.start_line}-{s.end_line}. "
            f"See FILE: {anchor}."
        )
    if what == "calls":
        return f"`{name}` calls {', '.join(f'`{c}`' for c in calls)}. See FILE: {anchor}."
    if what == "params":
        return f"`{name}` takes `{_params(unit)}`. See FILE: {anchor}."
    if doc:
        desc = f": {doc[0].lower() + doc[1:]}"
    elif calls:
        desc = f" that calls {', '.join(f'`{c}`' for c in calls)}"
    else:
        desc = f" declared as `{unit.signature}`" if unit.signature else ""
    return f"`{name}` is a {unit.kind} in {unit.file}{desc}. See FILE: {anchor}."


def _contradiction(
    unit: Unit, s: Snippet, lang: str, other: str | None, rng: random.Random
) -> tuple[str, str] | None:
    """A false premise about the unit and its correction, or None when no fact allows one."""
    name, anchor = display_name(unit.symbol), _anchor(s)
    see, see_zh = f"See FILE: {anchor}.", f"参见 FILE: {anchor}。"
    errors = unit.facts.get("error") or []
    crash = CRASH.get(unit.language)
    options: list[str] = []
    if errors and crash and not re.search(crash[0], unit.text):
        options.append("crash")
    if not errors and not _ERROR_WORDS.search(unit.text):
        options.append("no_error")
    calls = _calls(unit)
    if calls and other and other not in unit.text:
        options.append("calls")
    if not options:
        return None
    pick = rng.choice(options)
    raised = RAISES.get(unit.language)
    if pick == "crash":
        assert crash is not None
        err = errors[0]
        if lang == "zh":
            verb = "抛出异常" if raised else "返回错误"
            q = f"{name} 既{verb}又{crash[3]}，对吗？"
            a = f"不对。`{name}` 通过 `{err}` 处理错误，代码中没有 {crash[4]}。{see_zh}"
            return q, a
        verb = f"{raised} an exception" if raised else "returns an error"
        q = f"{name} both {verb} and {crash[1]}, right?"
        a = f"No. `{name}` handles errors with `{err}`; the code shown has no {crash[2]}. {see}"
        return q, a
    if pick == "no_error":
        if lang == "zh":
            q = f"{name} 在输入无效时会{'抛出异常' if raised else '返回错误'}，对吗？"
            a = f"不对。代码中的 `{name}` 没有任何错误处理：既不返回也不抛出错误。{see_zh}"
            return q, a
        verb = f"{raised} an exception" if raised else "returns an error"
        q = f"{name} {verb} when its input is invalid, right?"
        a = (
            f"No. `{name}` has no error handling in the code shown: it neither returns nor "
            f"raises an error. See FILE: {anchor}."
        )
        return q, a
    listed_zh = "、".join(f"`{c}`" for c in calls)
    listed_en = ", ".join(f"`{c}`" for c in calls)
    if lang == "zh":
        q = f"{name} 调用了 {other}，对吗？"
        a = f"不对。`{name}` 没有调用 `{other}`，它调用的是 {listed_zh}。参见 FILE: {anchor}。"
        return q, a
    q = f"{name} calls {other}, right?"
    a = f"No. `{name}` does not call `{other}`; it calls {listed_en}. See FILE: {anchor}."
    return q, a


def absent_terms(units: Iterable[Unit], candidates: Sequence[str]) -> list[str]:
    """The candidates no unit mentions (case-insensitive, by each word of four letters or more)."""
    corpus = "\n".join(f"{u.file}\n{u.symbol}\n{u.text}" for u in units).lower()
    out = []
    for term in candidates:
        words = [w for w in re.findall(r"[a-z0-9]+", term.lower()) if len(w) >= 4] or [term.lower()]
        if not any(w in corpus for w in words):
            out.append(term)
    return out


def held_out_symbols(symbols: Iterable[str], share: float, seed: int) -> set[str]:
    """A deterministic ``share`` of the symbols (at least one when there are two or more)."""
    ordered = sorted(set(symbols), key=lambda s: hashlib.sha1(f"{seed}\0{s}".encode()).hexdigest())
    if len(ordered) < 2 or share <= 0:
        return set()
    count = min(len(ordered) - 1, max(1, round(len(ordered) * share)))
    return set(ordered[:count])


def build_samples(
    units: Sequence[Unit],
    file_lines: dict[str, int],
    n: int = 500,
    seed: int = 0,
    held_out: float = 0.2,
    max_lines: int = MAX_SNIPPET_LINES,
    distractors: int = 1,
) -> TrapSet:
    """About ``n`` distinct samples (fewer if the repository is too small), split by symbol;
    each shows its unit and ``distractors`` units of other files, ``max_lines`` lines each."""
    rng = random.Random(seed)
    pool = [
        u
        for u in units
        if u.kind in ANSWERABLE_KINDS and not u.is_test and u.symbol and u.text.strip()
    ]
    if not pool:
        return TrapSet([], [], dict(file_lines))
    callables = [u for u in pool if u.kind in CALLABLE_KINDS]
    techs = absent_terms(units, TECHS) or ["MySQL"]
    platforms = absent_terms(units, PLATFORMS) or ["Kubernetes"]
    names = sorted({short_name(u.symbol) for u in callables if len(short_name(u.symbol)) > 3})
    systems = {lang: prompts.load("system", lang) for lang in LANGS}
    users = {lang: prompts.load("user", lang) for lang in LANGS}

    def make(kind: str, lang: str, unit: Unit, question: str, target: str, cites: bool) -> Sample:
        main = snippet(unit, max_lines)
        others = [u for u in pool if u.file != unit.file] or [u for u in pool if u is not unit]
        extra = rng.sample(others, min(distractors, len(others)))
        shown = [main] + [snippet(u, max_lines) for u in extra]
        rng.shuffle(shown)
        context = "\n\n".join(s.render() for s in shown)
        return Sample(
            kind=kind,
            lang=lang,
            symbol=unit.symbol,
            question=question,
            system=systems[lang],
            user=users[lang].format(query=question, context=context),
            target=target,
            cite=(main.file, main.start_line, main.end_line) if cites else None,
            context=tuple((s.file, s.start_line, s.end_line) for s in shown),
        )

    def one(kind: str, lang: str) -> Sample | None:
        if kind == "A":
            unit = rng.choice(pool)
            t1, t2 = rng.sample(techs, 2) if len(techs) > 1 else (techs[0], "Redis")
            q = rng.choice(OUT_OF_SCOPE[lang]).format(
                name=display_name(unit.symbol), t1=t1, t2=t2, p=rng.choice(platforms)
            )
            return make(kind, lang, unit, q, prompts.load("refusal", lang), False)
        if kind == "B":
            unit = rng.choice(pool)
            q, a = rng.choice(VAGUE[lang])
            name = display_name(unit.symbol)
            return make(kind, lang, unit, q.format(name=name), a.format(name=name), False)
        if kind == "C":
            if not callables:
                return None
            unit = rng.choice(callables)
            other = rng.choice([x for x in names if x != short_name(unit.symbol)] or [None])
            qa = _contradiction(unit, snippet(unit, max_lines), lang, other, rng)
            return make(kind, lang, unit, *qa, True) if qa else None
        unit = rng.choice(pool)
        whats = ["describe", "describe", "where"]
        whats += ["calls"] if _calls(unit) else []
        whats += ["params"] if unit.kind in CALLABLE_KINDS and _params(unit) else []
        what = rng.choice(whats)
        q = rng.choice(GROUNDED[lang][what]).format(name=display_name(unit.symbol))
        target = _grounded(unit, snippet(unit, max_lines), lang, what)
        return make(kind, lang, unit, q, target, True)

    samples: list[Sample] = []
    seen: set[tuple] = set()
    for kind in KINDS:
        quota = round(n * KIND_SHARES[kind])
        made = tries = 0
        while made < quota and tries < quota * 20:
            lang = LANGS[made % 2]
            tries += 1
            s = one(kind, lang)
            if s is None or (key := (s.question, s.context, s.target)) in seen:
                continue
            seen.add(key)
            samples.append(s)
            made += 1
    held = held_out_symbols((s.symbol for s in samples), held_out, seed)
    return TrapSet(
        train=[s for s in samples if s.symbol not in held],
        held_out=[s for s in samples if s.symbol in held],
        file_lines=dict(file_lines),
    )


def build_traps(
    repo: str,
    n: int = 500,
    seed: int = 0,
    held_out: float = 0.2,
    max_lines: int = MAX_SNIPPET_LINES,
    distractors: int = 1,
) -> TrapSet:
    """Samples from the units of an indexed repository (``coderag index`` first)."""
    catalog = get_catalog()
    catalog.get_repo(repo)  # NotFound with a hint when the repository is unknown
    units = catalog.units(repo)
    lines = {f: catalog.file_lines(repo, f) for f in {u.file for u in units}}
    known = {f: count for f, count in lines.items() if count}
    return build_samples(units, known, n, seed, held_out, max_lines, distractors)
