"""Definition and bracket rules for gold ranges in TypeScript, JavaScript, Java, Rust, C and Go.

``check_questions.py`` uses them to decide whether a gold range starts at a definition a
reader would call "the answer" (after doc comments, annotations or attributes), spans whole
brackets and ends on the line that closes that definition.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

TS_SUFFIXES = (".ts", ".tsx", ".mts", ".cts")
JAVA_SUFFIXES = (".java",)
RUST_SUFFIXES = (".rs",)
JS_SUFFIXES = (".js", ".jsx", ".mjs", ".cjs")
C_SUFFIXES = (".c", ".h")
GO_SUFFIXES = (".go",)

_TS_MODIFIERS = (
    r"(?:(?:export|default|declare|abstract|async|public|private|protected|static|readonly|"
    r"override|get|set)\s+)*"
)
_TS_STATEMENTS = (
    r"(?:if|for|while|switch|catch|return|throw|new|typeof|await|yield|else|do|try|void|"
    r"super|this)\b"
)
# What may sit between `=` and the function of a wrapped definition: a bundler annotation
# such as /*#__PURE__*/ and wrapper calls such as ramda's _curry2(
_TS_WRAPPERS = r"(?:/\*.*?\*/\s*)?(?:[\w$.]+\(\s*)*"

TS_DEF = re.compile(
    r"^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?"
    r"(?:function\s*\*?\s*[\w$]*|class\s+[\w$]+|interface\s+[\w$]+|type\s+[\w$]+|"
    r"(?:const\s+)?enum\s+[\w$]+|namespace\s+[\w$.]+|module\s+(?:[\w$.]+|'[^']*'|\"[^\"]*\")|"
    r"global\s*\{)"  # declarations, `declare module 'x' {` and `declare global {`
    r"|^(?:export\s+)?(?:const|let|var)\s+[\w$]+\s*(?::[^=]+)?=\s*"
    + _TS_WRAPPERS
    + r"(?:async\s+)?"
    r"(?:function\b|<[^>]*>\s*\(|\(|[\w$]+\s*=>)"  # const f = () =>, var f = _curry2(function
    r"|^export\s+(?:const|let|var)\s+[\w$]+"  # exported constants
    # methods; also calls that define one, such as terser's def_optimize(AST_X, function
    rf"|^(?!{_TS_STATEMENTS}){_TS_MODIFIERS}(?:\*\s*)?(?:#?[\w$]+|\[[^\]]+\])\??\s*[<(]"
    rf"|^(?!{_TS_STATEMENTS}){_TS_MODIFIERS}#?[\w$]+\??\s*(?::[^=]+)?="
    r"\s*(?:async\s+)?\("  # arrow members
    rf"|^{_TS_MODIFIERS}abstract\s+{_TS_MODIFIERS}#?[\w$]+[?!]?\s*[:;(<]"  # abstract members
)
"""A line that starts a TypeScript definition: declaration, const arrow function or member."""

_JAVA_MODIFIER = (
    r"(?:public|protected|private|static|final|abstract|synchronized|native|default|"
    r"strictfp|sealed|non-sealed|transient|volatile|@[\w.]+(?:\([^()]*\))?)"
)
_JAVA_MODIFIERS = rf"(?:{_JAVA_MODIFIER}\s+)*"  # annotations may sit among the modifiers
_JAVA_GENERIC = r"<(?:[^<>()]|<(?:[^<>()]|<[^<>()]*>)*>)*>"  # type parameters, nested twice
_JAVA_STATEMENTS = (
    r"(?:return|new|throw|if|for|while|switch|catch|else|do|try|case|assert|yield|super|"
    r"this)\b"
)

JAVA_DEF = re.compile(
    rf"^{_JAVA_MODIFIERS}(?:class|interface|enum|record|@interface)\s+\w+"  # types
    rf"|^(?!{_JAVA_STATEMENTS}){_JAVA_MODIFIERS}(?:{_JAVA_GENERIC}\s*)?"
    r"[\w.$]+(?:<[^()]*>)?(?:\[\])*\s+\w+\s*\("  # methods
    rf"|^(?!{_JAVA_STATEMENTS}){_JAVA_MODIFIERS}(?:{_JAVA_GENERIC}\s*)?"
    r"[A-Z]\w*\s*\("  # constructors
    rf"|^{_JAVA_MODIFIERS}<[^()]*$"  # generic method whose head wraps inside or after <T>
    rf"|^(?:{_JAVA_MODIFIER}\s+)+(?:{_JAVA_GENERIC}\s*)?[\w.$]+(?:<[^()]*>)?(?:\[\])*\s*$"
    # ^ a method whose name wraps onto the next line, after at least one modifier
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
    r"|^[\w$]+\s*=\s*"
    + _TS_WRAPPERS
    + r"(?:async\s+)?function\b"  # getTag = function(
    + r"|^[\w$]+(?:\.[\w$]+)+\(\s*(?:'[^']*'|\"[^\"]*\")\s*,\s*(?:async\s+)?function\b"
    # ^ a method defined by a call: AST_Node.DEFMETHOD("name", function ...
    r"|^(?:async\s+)?(?:get\s+|set\s+)?(?:[\w$]+|'[^'\n]*'|\"[^\"\n]*\"|\[[^\]]+\])\s*:\s*"
    r"(?:async\s+)?(?:function\b|\(|[\w$]+\s*=>)"  # object-literal members, '@@x/y': too
    r"|^Object\.defineProperty\("  # accessors defined on a prototype
    r"|^\(function\b|^;?\(\s*function\b"  # an IIFE-wrapped module
)
"""A line that starts a JavaScript definition: TypeScript's forms, CommonJS and prototype
assignments, bare ``x = function``, ``X.DEFMETHOD("name", function``, object-literal members,
``Object.defineProperty`` and IIFEs."""

C_DEF = re.compile(
    r"^#\s*define\s+\w+"
    r"|^(?:(?:static|const|extern|typedef)\s+)*(?:struct|union|enum)\b"  # static struct {..} t[]
    r"|^typedef\b"
    r"|^(?:[A-Za-z_]\w*[\s*]+)+\**\s*[A-Za-z_]\w*\s*\("  # a function head: type name(
    r"|^(?:static\s+|extern\s+|const\s+)*[A-Za-z_][\w\s*]*\s[*]*[A-Za-z_]\w*(?:\[[^\]]*\])*\s*=(?!=)"
)
"""A line that starts a C definition: function head, struct/union/enum, typedef, macro or an
initialised variable."""

C_TYPE_LINE = re.compile(
    r"^(?!(?:else|do|return|goto|case|default|break|continue|sizeof)\b)"
    r"(?:(?:[A-Za-z_]\w*|(?:__attribute__|__declspec)\s*\([^;{}]*\))(?:[\s*]+|$))+$"
    # ^ each name ends at a separator, so no backtracking blow-up
)
"""A return type alone on its line, macros included (``LZ4_FORCE_INLINE int``, ``int ESECT``,
``static TrieNode* PURE``): a definition start when the next line names the function."""

C_NAME_LINE = re.compile(r"^(?:\**\s*[A-Za-z_]\w*\s*\(|\(\s*\*)(?!.*;\s*$)")
"""The name line of a function whose return type sits alone on the line above."""

GO_DEF = re.compile(
    r"^func\b"  # functions and methods
    r"|^(?:type|const|var)\b"  # declarations (single or grouped)
    r"|^[A-Za-z_][\w.]*\s*(?::[^=]+)?=(?!=)"  # a spec inside a var/const group
)
"""A line that starts a Go definition."""

_PATTERNS = {
    "typescript": TS_DEF,
    "javascript": JS_DEF,
    "java": JAVA_DEF,
    "rust": RUST_DEF,
    "c": C_DEF,
    "go": GO_DEF,
}

_LEADING_COMMENT = re.compile(r"^(?:/\*.*?\*/\s*)+")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/")
_TRAILING_COMMENT = re.compile(r"//.*$")
_RUST_CHAR = re.compile(r"'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'")
_RUST_RAW = re.compile(r'b?r(#*)"')
_C_DIRECTIVE = re.compile(r"^\s*#\s*(\w+)")

# A `/` after one of these, or after one of the keywords, starts a regex literal, not a division
_REGEX_AFTER = frozenset("(,=:[!&|?{};")
_REGEX_KEYWORDS = frozenset(
    {"return", "typeof", "case", "in", "of", "delete", "void", "throw", "instanceof", "new"}
    | {"else", "do", "yield", "await"}
)
# A `(` or `[` after a name is a call, a parameter list or an index; after these it is a group
_GROUP_KEYWORDS = frozenset({"var", "const", "type", "import", "return"})
_CLOSED_END = re.compile(r"[})\]][;,]?\s*(?://.*|/\*.*\*/)?\s*$")
# a type argument list `Or<` ... `>` spans lines without counting as brackets
_CONTINUING_START = re.compile(r"^(?:\.(?!\.\.)|\?|:|=>|&&|\|\||\+|>)")


def language_of(rel: str) -> str | None:
    """Return "typescript", "javascript", "java", "rust", "c" or "go" for a source path, None
    for other languages."""
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
    if rel.endswith(GO_SUFFIXES):
        return "go"
    return None


def starts_definition(language: str, line: str) -> bool:
    """Return whether ``line`` on its own starts a definition in ``language``."""
    text = _LEADING_COMMENT.sub("", line.strip())  # `/* package */ static int f(`
    return bool(_PATTERNS[language].match(text))


def definition_at(language: str, lines: list[str], line_no: int) -> bool:
    """Return whether 1-based ``line_no`` of ``lines`` starts a definition, looking at the
    neighbouring line where the language splits a head (C's return type on its own line)."""
    if starts_definition(language, lines[line_no - 1]):
        return True
    if language != "c":
        return False
    text = _strip_comments(lines[line_no - 1])
    if C_TYPE_LINE.match(text):  # `static` / `ATTR_MACRO` / `size_t f(` on three lines
        below = [_strip_comments(s) for s in lines[line_no : line_no + 4]]
        below = [s for s in below if s]
        while below and C_TYPE_LINE.match(below[0]):
            below.pop(0)
        return bool(below) and bool(C_NAME_LINE.match(below[0]) or C_DEF.match(below[0]))
    if C_NAME_LINE.match(text) and line_no > 1:
        return bool(C_TYPE_LINE.match(_strip_comments(lines[line_no - 2])))
    return False


def is_blank_or_comment(line: str) -> bool:
    """Return whether ``line`` holds no code: blank, a comment, or inside a block comment."""
    text = line.strip()
    if text == "*" or text.startswith(("*/", "* ")) or (text.startswith("/*") and "*/" not in text):
        return True
    return not _strip_comments(text)


def _strip_comments(line: str) -> str:
    """Return ``line`` stripped, without ``/* */`` comments or a trailing ``//`` comment."""
    return _TRAILING_COMMENT.sub("", _BLOCK_COMMENT.sub(" ", line)).strip()


def skip_attributes(language: str, lines: list[str], start: int, end: int) -> int | None:
    """Return the first line at or after ``start`` past doc comments, comments, Java
    annotations, TypeScript decorators or Rust attributes directly above a definition."""
    line_no = start
    while line_no <= end:
        text = lines[line_no - 1].strip()
        if text.startswith("//"):
            line_no += 1
            continue
        if text.startswith("/*"):
            close = text.find("*/", 2)
            while close < 0 and line_no < end:
                line_no += 1
                text = lines[line_no - 1].strip()
                close = text.find("*/")
            if close < 0:
                return None
            if text[close + 2 :].strip():
                return line_no  # code after the comment: `/* package */ int f(`
            line_no += 1
            continue
        if language == "rust":
            is_attr = text.startswith("#[")
        elif language in ("java", "typescript", "javascript"):
            is_attr = text.startswith("@") and not text.startswith("@interface")
        else:
            is_attr = False
        if not is_attr:
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
    for _, delta, _ in _brackets(text, language):
        depth += delta
        low = min(low, depth)
    return depth, low


def closed_before_end(text: str, language: str) -> int | None:
    """Return the 1-based line of ``text``, before its last, at whose end a definition opened
    earlier has closed all its brackets again, or None when only the last line closes it.

    A line counts as opening the definition when it ends inside a ``{``, an array ``[`` or a
    Go ``var (`` group, so a parameter list that closes before the body opens
    (``f(a,\\n b)\\n{``) does not end the definition early.
    """
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]
    stack: list[bool] = []  # one entry per open bracket: does it open a body or group?
    events: list[tuple[int, int, bool]] = []  # (position, depth after, body open after)
    for pos, delta, is_body in _brackets(text, language):
        if delta > 0:
            stack.append(is_body)
        elif stack:
            stack.pop()
        events.append((pos, len(stack) if stack else 0, any(stack)))
    positions = [pos for pos, _, _ in events]
    lines = text.split("\n")
    opened = False
    for line, newline in enumerate(newlines, 1):
        index = bisect.bisect_left(positions, newline) - 1
        depth, body = (events[index][1], events[index][2]) if index >= 0 else (0, False)
        if opened and depth == 0 and _ends_definition(lines[line - 1], lines[line:]):
            return line
        opened = opened or body
    return None


def _ends_definition(line: str, rest: list[str]) -> bool:
    """Return whether ``line``, where the brackets are all closed, ends the definition: it ends
    with a closing bracket (``}``, ``});``, ``},``) and the next non-blank line does not go on
    with an operator (``? A : B``, ``.pipe(``), as a TypeScript conditional type does."""
    if not _CLOSED_END.search(line):
        return False
    below = next((s.strip() for s in rest if s.strip()), "")
    return not _CONTINUING_START.match(below)


def _brackets(text: str, language: str) -> Iterator[tuple[int, int, bool]]:
    """Yield (position, +1 or -1, opens a body or group) for each bracket outside literals."""
    if language == "c":
        text = first_branches(text)
    i, n = 0, len(text)
    while i < n:
        i, opened = _skip_literal(text, i, language)
        if opened is None:
            continue
        if opened:
            yield i, opened, opened > 0 and _opens_body(text, i)
        i += 1


def _opens_body(text: str, i: int) -> bool:
    """Return whether the bracket at ``i`` opens a body or a group that a definition ends by
    closing: a ``{`` (not a type literal after ``<``, ``&``, ``|``, ``,``, ``:`` or ``(``), an
    array ``[`` (not an index) or a Go ``var (`` group; never a ``(`` of parameters or
    arguments, which closes before the body opens (``f(a,\\n b)\\n{``)."""
    j = i - 1
    while j >= 0 and text[j] in " \t\r\n":
        j -= 1
    if text[i] == "{":  # one alone at the start of its line opens a body (Rust after `where`)
        return j < 0 or text[j] not in "<&|,:(?" or _starts_line(text, i)
    k = j
    while k >= 0 and (text[k].isalnum() or text[k] in "_$"):
        k -= 1
    word = text[k + 1 : j + 1]
    if text[i] == "(":
        return word in _GROUP_KEYWORDS
    return j < 0 or word in _GROUP_KEYWORDS or not (word or text[j] in ")]>")


def _starts_line(text: str, i: int) -> bool:
    """Return whether only blanks precede index ``i`` on its line."""
    start = text.rfind("\n", 0, i) + 1
    return not text[start:i].strip()


def first_branches(text: str) -> str:
    """Blank (with spaces, keeping offsets) the ``#else``/``#elif`` branches of C conditionals
    so only the first branch of each counts: branches that each open the same brace would
    otherwise unbalance the range."""
    out: list[str] = []
    skipping: list[bool] = []  # one entry per open #if: is this group past its first branch?
    continued = False
    for line in text.split("\n"):
        directive = None if continued else _C_DIRECTIVE.match(line)
        continued = line.rstrip().endswith("\\") and (continued or directive is not None)
        if directive:
            word = directive.group(1)
            if word in ("if", "ifdef", "ifndef"):
                skipping.append(False)
            elif word in ("else", "elif", "elifdef", "elifndef"):
                if skipping:
                    skipping[-1] = True
                else:  # the range began inside the first branch of this group
                    skipping.append(True)
                out.append(" " * len(line))
                continue
            elif word == "endif":
                if skipping:
                    skipping.pop()
                out.append(" " * len(line))
                continue
        out.append(" " * len(line) if any(skipping) else line)
    return "\n".join(out)


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
    elif language == "go":
        if ch == "`":
            j = text.find("`", i + 1)
            return (n if j < 0 else j + 1), None
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
        if ch == "/":
            regex_end = _regex_end(text, i)
            if regex_end is not None:
                return regex_end, None
    if ch in "{([":
        return i, 1
    if ch in "})]":
        return i, -1
    return i, 0


def _regex_end(text: str, i: int) -> int | None:
    """Return the index just past a JavaScript regex literal starting at ``i``, or None where
    the ``/`` is a division (after a value) or no closing ``/`` follows on the same line."""
    if text.startswith("/>", i):  # the end of a self-closing JSX tag
        return None
    j = i - 1
    while j >= 0 and text[j] in " \t\r":
        j -= 1
    arrow = text.startswith("=>", j - 1)  # `(l) => /^\s*$/.test(l)`
    if j >= 0 and text[j] != "\n" and text[j] not in _REGEX_AFTER and not arrow:
        k = j
        while k >= 0 and (text[k].isalnum() or text[k] in "_$"):
            k -= 1
        if text[k + 1 : j + 1] not in _REGEX_KEYWORDS:
            return None
    j, n, in_class = i + 1, len(text), False
    while j < n:
        ch = text[j]
        if ch == "\n":
            return None
        if ch == "\\":
            j += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "/":
            j += 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1  # flags
            return j
        j += 1
    return None


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
