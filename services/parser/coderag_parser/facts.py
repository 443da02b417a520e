"""Semantic facts of each unit (seed 004 §3.1), read from the query's captures alone.

FunctionSignature (name, receiver, params, returns, exported), ErrorHandlingPattern
(``@fact.error``), ContextUsage (``@fact.context``), DependencyCall (``@reference.call`` with the
receiver's type inferred from a Go-style receiver or ``self``/``this``), ConfigReference
(``@fact.config``) and DeprecatedMarker (team conventions, a regex over docs and comments) go on
the unit; the file's call sites and imports feed the call and import graphs, from which
TestCoverageHint is derived.
"""

from __future__ import annotations

import bisect
import re
from functools import cache
from typing import Any

from coderag_parser.definitions import METHOD_CONTAINERS, Definition
from coderag_parser.languages import DEFAULT_EXPORTED, EXPORTED, TYPED_NAMES
from coderag_parser.parsed import ParsedFile

DEPRECATED_MARKERS = r"(?i)\bdeprecated\b|@Deprecated|\bDEPRECATED\b"
"""Default team convention for deprecation markers (``// deprecated since v2.1``, ...)."""

SELF_NAMES = frozenset({"self", "this", "cls"})
"""Receivers that name the enclosing class."""

FACT_LIMIT = 12
"""Most entries kept per fact list (a 300-line function can have hundreds of calls)."""

_COMMENT_LINE = re.compile(r"^\s*(#|//|/\*|\*|@|--)")


def _snippet(node: Any) -> str:
    text = (node.text or b"")[:400].decode("utf-8", "replace")
    return " ".join(text.split())[:100]


def _typed(language: str, where: str, text: str, prefix: str = "") -> dict[str, str]:
    """Name -> type that ``text`` states by a language's ``TYPED_NAMES[where]`` patterns
    (``prefix`` before each name: ``self.`` for fields); the first statement of a name wins."""
    out: dict[str, str] = {}
    for pattern in _patterns(language, where):
        for m in pattern.finditer(text):
            out.setdefault(prefix + m["name"], m["type"])
    return out


@cache
def _patterns(language: str, where: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.M) for p in TYPED_NAMES.get(language, {}).get(where, ()))


def field_types(language: str, units: list[Any], owners: dict[int, Definition]) -> dict[str, dict]:
    """Class -> (``self.name``/``this.name`` -> type) from its methods' assignments."""
    out: dict[str, dict[str, str]] = {}
    if not _patterns(language, "fields"):
        return out
    for i, unit in enumerate(units):
        d = owners.get(i)
        if d is None or d.parent is None or d.parent.kind not in METHOD_CONTAINERS:
            continue
        for attr, kind in _typed(language, "fields", unit.text).items():
            for name in SELF_NAMES:
                out.setdefault(d.parent.name, {}).setdefault(f"{name}.{attr}", kind)
    return out


def _receiver_types(
    d: Definition | None, language: str = "", text: str = "", fields: dict | None = None
) -> dict[str, str]:
    """Variable -> type for the receivers a definition's calls may use: its receiver, its
    class for ``self``/``this``, its typed parameters and locals, its class's typed fields."""
    if d is None:
        return {}
    types: dict[str, str] = {}
    if d.receiver:
        parts = d.receiver.strip("()").split()
        if len(parts) >= 2:
            types[parts[0]] = parts[-1]
    container = d.parent.name if d.parent is not None and d.parent.kind in METHOD_CONTAINERS else ""
    named = d.receiver.strip("()").split()
    if not container and len(named) == 1:
        container = named[0].rsplit(".", 1)[-1]  # `X.prototype.m = function`: `this` is an X
    if language:
        for table in (
            (fields or {}).get(container, {}),
            _typed(language, "locals", text),
            _typed(language, "params", d.params),
        ):
            types.update({k: v for k, v in table.items() if k not in SELF_NAMES})
    if container:
        for name in SELF_NAMES:
            types[name] = container
    return types


def _is_key(node: Any) -> bool:
    """Whether a callee's name is the key of a subscript (``this[writeSym](...)``)."""
    parent = node.parent
    return parent is not None and parent.type == "subscript_expression"


def _exported(language: str, name: str, signature: str) -> bool:
    field, pattern = EXPORTED.get(language, DEFAULT_EXPORTED)
    return bool(re.search(pattern, name if field == "name" else signature))


def collect_facts(
    parsed: ParsedFile,
    matches: list,
    language: str,
    owners: dict[int, Definition],
    markers: str,
) -> None:
    """Attach facts to ``parsed.units`` and fill ``parsed.calls`` and ``parsed.imports``."""
    units = parsed.units
    starts = [u.start_line for u in units]
    ids = [u.id for u in units]  # a sha1 each: compute once, not per call site

    def owner(row: int) -> int | None:
        i = bisect.bisect_right(starts, row + 1) - 1
        return i if i >= 0 and units[i].end_line >= row + 1 else None

    facts: list[dict[str, list[str]]] = [{} for _ in units]
    fields = field_types(language, units, owners)
    receivers: dict[int, dict[str, str]] = {}

    def receiver_types(i: int) -> dict[str, str]:
        if i not in receivers:
            receivers[i] = _receiver_types(owners.get(i), language, units[i].text, fields)
        return receivers[i]

    for _, caps in matches:
        if "import" in caps and "name" in caps:
            parsed.imports.append(_snippet(caps["name"][0]).strip("\"'<>"))
            continue
        key = next((k for k in caps if k.startswith("fact.") or k == "reference.call"), None)
        if key is None:
            continue
        node = caps[key][0]
        i = owner(node.start_point[0])
        if i is None:
            continue
        if key == "reference.call":
            if "name" not in caps:
                continue
            callee = _snippet(caps["name"][0])
            keyed = _is_key(caps["name"][0])
            if keyed:
                callee = f"[{callee}]"
            recv = _snippet(caps["call.receiver"][0]) if "call.receiver" in caps else ""
            rtype = receiver_types(i).get(recv, "")
            parsed.calls.append(
                {
                    "caller": ids[i],
                    "callee": callee,
                    "receiver": recv,
                    "receiver_type": rtype,
                    "line": node.start_point[0] + 1,
                }
            )
            label = f"{recv}{'' if keyed else '.'}{callee}" if recv else callee
            entry = f"{label} ({rtype})" if rtype else label
        else:
            entry = _snippet(node)
        bucket = facts[i].setdefault(
            key.removeprefix("fact.").replace("reference.call", "calls"), []
        )
        if entry not in bucket and len(bucket) < FACT_LIMIT:
            bucket.append(entry)
    marker_re = re.compile(markers)
    for i, unit in enumerate(units):
        d = owners.get(i)
        out: dict[str, Any] = dict(facts[i])
        if d is not None and unit.kind in ("function", "method"):
            out["signature"] = {
                "name": d.name,
                "receiver": d.receiver,
                "params": d.params,
                "returns": d.returns,
                "exported": _exported(language, d.name, unit.signature),
            }
        own = unit.text.splitlines()[: min(40, unit.end_line - unit.start_line + 1)]
        notes = [unit.doc] + [ln for ln in own if _COMMENT_LINE.match(ln)]
        hit = next((ln for ln in "\n".join(notes).splitlines() if marker_re.search(ln)), None)
        if hit:
            out["deprecated"] = hit.strip()[:120]
        if out:
            unit.facts = out
