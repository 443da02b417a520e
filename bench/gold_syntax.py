"""Definition and bracket rules for gold ranges in TypeScript, JavaScript, Java, Rust and C.

``check_questions.py`` uses them to decide whether a gold range starts at a definition a
reader would call "the answer" (after annotations or attributes) and spans whole brackets.
"""

from __future__ import annotations

import re

TS_SUFFIXES = (".ts", ".tsx", ".mts", ".cts")
JAVA_SUFFIXES = (".java",)
RUST_SUFFIXES = (".rs",)
JS_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs")
C_SUFFIXES = (".c", ".h")

_TS_MODIFIERS = (
    r"(?:(?:export|default|declare|abstract|async|public|private|protected|static|readonly|"
    r"override|get|set)\s+)*"
)
_TS_STATEMENTS = (
    r"(?:if|for|while|switch|catch|return|throw|new|typeof|await|yield|else|do|try|void|"
    r"super|this)\b"
)

TS_DEF = re.compile(
    r"^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?"
    r"(?:function\s*\*?\s*[\w$]*|class\s+[\w$]+|interface\s+[\w$]+|type\s+[\w$]+|"
    r"(?:const\s+)?enum\s+[\w$]+|namespace\s+[\w$.]+)"  # declarations
    r"|^(?:export\s+)?(?:const|let|var)\s+[\w$]+\s*(?::[^=]+)?=\s*"
    r"(?:async\s+)?(?:function\b|<[^>]*>\s*\(|\(|[\w$]+\s*=>)"  # const f = () =>
    r"|^export\s+(?:const|let|var)\s+[\w$]+"  # exported constants
    rf"|^(?!{_TS_STATEMENTS}){_TS_MODIFIERS}(?:\*\s*)?(?:#?[\w$]+|\[[^\]]+\])\??\s*[<(]"  # methods
    rf"|^(?!{_TS_STATEMENTS}){_TS_MODIFIERS}#?[\w$]+\??\s*(?::[^=]+)?="
    r"\s*(?:async\s+)?\("  # arrow members
)
"""A line that starts a TypeScript definition: declaration, const arrow function or member."""

_JAVA_MODIFIERS = (
    r"(?:(?:public|protected|private|static|final|abstract|synchronized|native|default|"
    r"strictfp|sealed|non-sealed|transient|volatile)\s+)*"
)
_JAVA_STATEMENTS = (
    r"(?:return|new|throw|if|for|while|switch|catch|else|do|try|case|assert|yield|super|"
    r"this)\b"
)

JAVA_DEF = re.compile(
    rf"^{_JAVA_MODIFIERS}(?:class|interface|enum|record|@interface)\s+\w+"  # types
    rf"|^(?!{_JAVA_STATEMENTS}){_JAVA_MODIFIERS}(?:<[^>]+>\s+)?"
    r"[\w.$]+(?:<[^()]*>)?(?:\[\])*\s+\w+\s*\("  # methods
    rf"|^(?!{_JAVA_STATEMENTS}){_JAVA_MODIFIERS}(?:<[^>]+>\s+)?[A-Z]\w*\s*\("  # constructors
    rf"|^{_JAVA_MODIFIERS}<[^()]+>\s*$"  # generic method whose head wraps after <T>
)
"""A line that starts a Java class, interface, enum, record, method or constructor."""

RUST_DEF = re.compile(
    r"^(?:pub(?:\s*\([^)]*\))?\s+)?(?:(?:default|const|async|unsafe|extern(?:\s+\"[^\"]*\")?)\s+)*"
    r"(?:fn|struct|enum|trait|impl|type|const|static|union|mod)\b"
    r"|^macro_rules!\s*\w+"
)
"""A line that starts a Rust fn, struct, enum, trait, impl, type, const or macro_rules."""

JS_DEF = re.compile(
    TS_DEF.pattern
    + r"|^(?:module\.)?exports(?:\.[\w$]+)?\s*=(?!=)"  # exports.x = / module.exports = ...
    r"|^[\w$]+(?:\.[\w$]+)+\s*=(?!=)"  # Model.prototype.save = function
    r"|^(?:async\s+)?(?:get\s+|set\s+)?[\w$'\"]+\s*:\s*(?:async\s+)?(?:function\b|\(|[\w$]+\s*=>)"
    r"|^Object\.defineProperty\("  # accessors defined on a prototype
    r"|^\(function\b|^;?\(\s*function\b"  # an IIFE-wrapped module
)
"""A line that starts a JavaScript definition: TypeScript's forms, CommonJS and prototype
assignments, object-literal members, ``Object.defineProperty`` and IIFEs."""

C_DEF = re.compile(
    r"^#\s*define\s+\w+"
    r"|^(?:typedef\s+)?(?:struct|union|enum)\b"
    r"|^typedef\b"
    r"|^(?:[A-Za-z_]\w*[\s*]+)+\**\s*[A-Za-z_]\w*\s*\("  # a function head: type name(
    r"|^(?:(?:static|inline|extern|const|unsigned|signed|struct|enum|union)\s+)*"
    r"[A-Za-z_]\w*[\s*]*$"  # a return type on a line of its own (K&R and GNU style)
    r"|^(?:static\s+|extern\s+|const\s+)*[A-Za-z_][\w\s*]*\s[*]*[A-Za-z_]\w*(?:\[[^\]]*\])*\s*=(?!=)"
)
"""A line that starts a C definition: function head, struct/union/enum, typedef, macro or an
initialised variable."""

_RUST_CHAR = re.compile(r"'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'")
_RUST_RAW = re.compile(r'b?r(#*)"')


def language_of(rel: str) -> str | None:
    """Return "typescript", "javascript", "java", "rust" or "c" for a source path, None for
    other languages."""
    if rel.endswith(TS_SUFFIXES):
        return "typescript"
    if rel.endswith(JS_SUFFIXES):
        return "javascript"
    if rel.endswith(C_SUFFIXES):
        return "c"
    if rel.endswith(JAVA_SUFFIXES):
        return "java"
    if rel.endswith(RUST_SUFFIXES):
        return "rust"
    return None


def starts_definition(language: str, line: str) -> bool:
    """Return whether the stripped ``line`` starts a definition in ``language``."""
    pattern = {
        "typescript": TS_DEF,
        "javascript": JS_DEF,
        "java": JAVA_DEF,
        "rust": RUST_DEF,
        "c": C_DEF,
    }[language]
    return bool(pattern.match(line.strip()))


def skip_attributes(language: str, lines: list[str], start: int, end: int) -> int | None:
    """Return the first line at or after ``start`` past Java annotations or Rust attributes."""
    opener = "#" if language == "rust" else "@"
    line_no = start
    while line_no <= end:
        text = lines[line_no - 1].strip()
        is_attr = text.startswith("#[") if language == "rust" else text.startswith(opener)
        if not is_attr or (language == "java" and text.startswith("@interface")):
            return line_no
        depth = bracket_depths(text, language)[0]
        line_no += 1
        while depth > 0 and line_no <= end:
            depth += bracket_depths(lines[line_no - 1], language)[0]
            line_no += 1
    return None


def bracket_depths(text: str, language: str) -> tuple[int, int]:
    """Return (net, lowest running) bracket depth of ``text``, skipping strings and comments."""
    depth = low = 0
    i, n = 0, len(text)
    while i < n:
        i, opened = _skip_literal(text, i, language)
        if opened is None:
            continue
        depth += opened
        low = min(low, depth)
        i += 1
    return depth, low


def _skip_literal(text: str, i: int, language: str) -> tuple[int, int | None]:
    """Return the index after a comment or literal at ``i``, or ``(i, +1/-1/0)`` for a char."""
    n = len(text)
    if text.startswith("//", i):
        j = text.find("\n", i)
        return (n if j < 0 else j), None
    if text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return (n if j < 0 else j + 2), None
    ch = text[i]
    if language == "rust":
        raw = _RUST_RAW.match(text, i)
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            closing = '"' + raw.group(1)
            j = text.find(closing, raw.end())
            return (n if j < 0 else j + len(closing)), None
        if ch == "'":
            char = _RUST_CHAR.match(text, i)
            return (char.end() if char else i + 1), None  # otherwise a lifetime
        if ch == '"':
            return _string_end(text, i, '"', multiline=True), None
    elif language == "c":
        if ch in "\"'":
            return _string_end(text, i, ch, multiline=False), None
    elif language == "java":
        if text.startswith('"""', i):
            j = text.find('"""', i + 3)
            return (n if j < 0 else j + 3), None
        if ch in "\"'":
            return _string_end(text, i, ch, multiline=False), None
    else:
        if ch == "`":
            return _template_end(text, i), None
        if ch in "\"'":
            return _string_end(text, i, ch, multiline=False), None
    if ch in "{([":
        return i, 1
    if ch in "})]":
        return i, -1
    return i, 0


def _string_end(text: str, i: int, quote: str, multiline: bool) -> int:
    """Return the index just past the string literal opened by ``quote`` at ``i``."""
    j, n = i + 1, len(text)
    while j < n and text[j] != quote and (multiline or text[j] != "\n"):
        j += 2 if text[j] == "\\" else 1
    return j + 1


def _template_end(text: str, i: int) -> int:
    """Return the index just past a TypeScript template literal, nested ``${}`` included."""
    j, n = i + 1, len(text)
    while j < n and text[j] != "`":
        if text[j] == "\\":
            j += 2
        elif text.startswith("${", j):
            depth, j = 1, j + 2
            while j < n and depth:
                if text[j] == "`":
                    j = _template_end(text, j)
                    continue
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                j += 1
        else:
            j += 1
    return j + 1
