"""Unit tests of the gold-range rules the benchmark checker applies to TypeScript, Java, Rust."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import check_questions, gold_syntax


@pytest.mark.parametrize(
    ("language", "line", "expected"),
    [
        ("typescript", "export function hashKey(queryKey: QueryKey): string {", True),
        ("typescript", "export const isServer = typeof window === 'undefined'", True),
        ("typescript", "const noop = () => {}", True),
        ("typescript", "  async fetch(options?: FetchOptions): Promise<TData> {", True),
        ("typescript", "  #dispatch(action: Action): void {", True),
        ("typescript", "  defaultQueryOptions<", True),
        ("typescript", "export interface QueryState<TData> {", True),
        ("typescript", "if (value) {", False),
        ("typescript", "return fetchFn(context)", False),
        ("typescript", "const plain = 3", False),
        ("java", "public static synchronized JPypeContext getInstance()", True),
        ("java", "private JPypeClassLoader(ClassLoader parent)", True),
        ("java", "public class TypeManager", True),
        ("java", "public static <T extends Executable>", True),
        ("java", "return new TypeManager(context);", False),
        ("java", "throw new RuntimeException(msg);", False),
        ("rust", "pub fn from_str<T>(s: &'a str) -> Result<T, Error>", True),
        ("rust", "impl<'a> Deserializer<'a> {", True),
        ("rust", "pub(crate) const fn new() -> Self {", True),
        ("rust", "macro_rules! toml {", True),
        ("rust", "let x = 3;", False),
    ],
)
def test_starts_definition(language: str, line: str, expected: bool) -> None:
    """Definition heads are recognised and statements are not."""
    assert gold_syntax.starts_definition(language, line) is expected


def test_rust_lifetimes_and_char_literals_do_not_hide_brackets() -> None:
    """A lifetime is not a quote; a '{' char literal is not a bracket."""
    text = "fn f<'a>(s: &'a str) -> char {\n    let c = '{';\n    c\n}"
    assert gold_syntax.bracket_depths(text, "rust") == (0, 0)


def test_ts_template_literal_brackets_are_skipped() -> None:
    """Brackets inside a template literal (outside ${}) do not count."""
    text = "function f(x) {\n  return `{${x.map((y) => `[${y}`)}`\n}"
    assert gold_syntax.bracket_depths(text, "typescript") == (0, 0)


def test_range_closing_below_its_start_is_reported() -> None:
    """A range that starts inside one body and ends in the next dips below zero."""
    text = "  }\n  bar() {\n"
    net, low = gold_syntax.bracket_depths(text, "typescript")
    assert (net, low) == (0, -1)


def test_attributes_are_skipped_before_the_definition() -> None:
    """Rust attributes and Java annotations sit before the definition line."""
    rust = ["#[derive(", "    Debug, Clone", ")]", "pub struct Value {", "}"]
    assert gold_syntax.skip_attributes("rust", rust, 1, 5) == 4
    java = ['@SuppressWarnings("unchecked")', "@Override", "public int size()", "{", "}"]
    assert gold_syntax.skip_attributes("java", java, 1, 5) == 3


def test_checker_reports_a_range_cut_inside_a_body(tmp_path: Path) -> None:
    """check_questions accepts a whole method and rejects one cut before its closing brace."""
    source = "class A {\n  run(x: number): number {\n    return x\n  }\n}\n"
    (tmp_path / "a.ts").write_text(source, encoding="utf-8")
    checker = check_questions.Checker(fetch_sources=False)
    checker.check_gold("whole", {"file": "a.ts", "start_line": 2, "end_line": 4}, tmp_path)
    assert checker.errors == []
    checker.check_gold("cut", {"file": "a.ts", "start_line": 2, "end_line": 3}, tmp_path)
    checker.check_gold("stmt", {"file": "a.ts", "start_line": 3, "end_line": 3}, tmp_path)
    assert [e.split(":")[0] for e in checker.errors] == ["cut", "stmt"]


def _errors(tmp_path: Path, name: str, source: str, start: int, end: int) -> list[str]:
    """Return the checker's errors for one gold range of ``source`` saved as ``name``."""
    (tmp_path / name).write_text(source, encoding="utf-8")
    checker = check_questions.Checker(fetch_sources=False)
    checker.check_gold("g", {"file": name, "start_line": start, "end_line": end}, tmp_path)
    return checker.errors


# Real snippets: chevrotain lexer.js, marked rules.js, remix-router utils.ts, nunjucks compiler.js
_LOOKAROUND = (
    "function usesLookAheadOrBehind(regExp) {\n"
    "    return /(\\(\\?=)|(\\(\\?!)|(\\(\\?<=)|(\\(\\?<!)/.test(regExp.source);\n"
    "}"
)
_ESCAPES = "inline._escapes = /\\\\([!\"#$%&'()*+,\\-./:;<=>?@\\[\\]\\\\^_`{|}~])/g;"
_EMAIL = (
    "inline._email = /[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+(@)[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}"
    "[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+(?![-_])/;"
)
_HEADER_NAME = (  # axios: a backtick and quotes after an arrow
    "const isValidHeaderName = (str) => /^[-_a-zA-Z0-9^`|~,!#$%&'*+.]+$/.test(str.trim());"
)
_DECODE_PATH = """export function decodePath(value: string) {
  try {
    return value
      .split("/")
      .map((v) => decodeURIComponent(v).replace(/\\//g, "%2F"))
      .join("/");
  } catch (error) {
    warning(
      false,
      `The URL path "${value}" could not be decoded because it is is a ` +
        `malformed URL segment. This is probably due to a bad percent ` +
        `encoding (${error}).`
    );

    return value;
  }
}"""
_COMPILE_LITERAL = """  _proto.compileLiteral = function compileLiteral(node) {
    if (typeof node.value === 'string') {
      var val = node.value.replace(/\\\\/g, '\\\\\\\\');
      val = val.replace(/"/g, '\\\\"');
      val = val.replace(/\\n/g, '\\\\n');
      this._emit("\\"" + val + "\\"");
    } else if (node.value === null) {
      this._emit('null');
    } else {
      this._emit(node.value.toString());
    }
  };"""


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("javascript", _LOOKAROUND),
        ("javascript", _ESCAPES),
        ("javascript", _EMAIL),
        ("typescript", _DECODE_PATH),
        ("javascript", _COMPILE_LITERAL),
        ("javascript", _HEADER_NAME),
    ],
)
def test_js_regex_literals_are_skipped(language: str, text: str) -> None:
    """Quotes, brackets, backticks and `//` inside a regex literal neither count nor open a
    string or comment."""
    assert gold_syntax.bracket_depths(text, language) == (0, 0)


def test_js_division_is_not_a_regex() -> None:
    """A `/` after a value divides: the brackets after it still count."""
    text = "const mid = (lo + hi) / 2; const q = total / (count + 1)"
    assert gold_syntax.bracket_depths(text, "javascript") == (0, 0)
    assert gold_syntax.bracket_depths("x = a / b; f(", "javascript") == (1, 0)


@pytest.mark.parametrize(
    ("language", "line", "expected"),
    [
        ("typescript", "declare module '@discordjs/opus' {", True),
        ("typescript", "declare global {", True),
        ("typescript", "    abstract app: FirebaseApp;", True),
        ("typescript", "  public abstract type: string", True),
        (
            "java",
            "public @Nullable Object invoke(Object proxy, Method method, Object[] args)",
            True,
        ),
        ("java", "/* package */ void migrateCipherStorage(@NonNull final String service,", True),
        ("java", "public static <", True),
        (
            "java",
            "public static <T extends ViewManagerDelegate<V>, V extends View> void updateProps(",
            True,
        ),
        ("javascript", "var xor = /*#__PURE__*/_curry2(function xor(a, b) {", True),
        ("javascript", "  getTag = function(value) {", True),
        ("javascript", 'AST_Toplevel.DEFMETHOD("def_global", function(node) {', True),
        ("javascript", "  '@@transducer/step': function (xs, x) {", True),
        ("javascript", "  getTag = baseGetTag;", False),
        ("c", "static struct {", True),
        ("c", "PyObject *result = NULL;", True),
    ],
)
def test_more_definition_heads(language: str, line: str, expected: bool) -> None:
    """Heads the question writers met: TS declare/abstract, Java annotations and comments
    inside the head, wrapped JS definitions, C tables."""
    assert gold_syntax.starts_definition(language, line) is expected


_MAXDBS = """int ESECT
mdb_env_set_maxdbs(MDB_env *env, MDB_dbi dbs)
{
	if (env->me_map)
		return EINVAL;
	env->me_maxdbs = dbs + CORE_DBS;
	return MDB_SUCCESS;
}
"""
_START_PARSING = """static XML_Bool  /* only valid for root parser */
startParsing(XML_Parser parser)
{
    if (hash_secret_salt == 0)
      hash_secret_salt = generate_hash_secret_salt(parser);
    return XML_TRUE;
}
"""


@pytest.mark.parametrize(
    ("source", "start"),
    [
        (_MAXDBS, 1),
        (_MAXDBS, 2),
        (_START_PARSING, 1),
        (_START_PARSING, 2),
        ("LZ4_FORCE_INLINE int\nLZ4HC_countBack(const BYTE* ip)\n{\n    return 0;\n}\n", 1),
        ("static TrieNode* PURE\ntrienode_get_next(TrieNode* node)\n{\n    return 0;\n}\n", 1),
        (
            "static\nZSTD_ALLOW_POINTER_OVERFLOW_ATTR\nsize_t f(void* dctx)\n{\n    return 0;\n}\n",
            1,
        ),
    ],
)
def test_c_return_type_with_macros_on_its_own_line(tmp_path: Path, source: str, start: int) -> None:
    """A return type carrying macros sits alone above the name line; either line starts it."""
    end = source.count("\n")
    assert _errors(tmp_path, "a.c", source, start, end) == []


def test_c_call_or_prototype_is_not_a_definition(tmp_path: Path) -> None:
    """A call statement, or a prototype under its type line, is not a definition start."""
    source = "int ESECT\nmdb_env_close(MDB_env *env);\n\n    mdb_env_close(env);\n"
    assert len(_errors(tmp_path, "a.c", source, 1, 2)) == 1
    assert len(_errors(tmp_path, "a.c", source, 4, 4)) == 1


def test_c_static_struct_table(tmp_path: Path) -> None:
    """`static struct {...} name[] = {` (hoedown's smartypants_subs) is one definition."""
    source = """static struct {
    uint8_t c0;
    const uint8_t *pattern;
} smartypants_subs[] = {
    { '\\'', "'s>" },
    { '-',  "--" },
};
"""
    assert _errors(tmp_path, "a.c", source, 1, 7) == []


def test_c_braces_split_across_if_else_count_once(tmp_path: Path) -> None:
    """zstd opens the same block in both branches of an #if; only the first branch counts."""
    source = """size_t
ZSTD_decompressBlock_internal(ZSTD_DCtx* dctx, int usePrefetchDecoder)
{
    {
#if !defined(ZSTD_FORCE_DECOMPRESS_SEQUENCES_SHORT) && \\
    !defined(ZSTD_FORCE_DECOMPRESS_SEQUENCES_LONG)
        if (usePrefetchDecoder) {
#else
        (void)usePrefetchDecoder;
        {
#endif
#ifndef ZSTD_FORCE_DECOMPRESS_SEQUENCES_SHORT
            return ZSTD_decompressSequencesLong(dctx);
#endif
        }
        return ZSTD_decompressSequences(dctx);
    }
}
"""
    assert _errors(tmp_path, "a.c", source, 1, 18) == []


_GO = """// NewRouter returns a new router instance.
func NewRouter() *Router {
	return &Router{namedRoutes: make(map[string]*Route)}
}

// Router registers routes to be matched and dispatches a handler.
func copyRouteRegexp(r *routeRegexp) *routeRegexp {
	c := *r
	return &c
}
"""


def test_go_range_must_end_at_the_closing_brace(tmp_path: Path) -> None:
    """A Go range that runs past its func into the next comment or func is rejected; one that
    starts at the doc comment and ends at the brace passes."""
    assert _errors(tmp_path, "mux.go", _GO, 1, 4) == []
    assert _errors(tmp_path, "mux.go", _GO, 2, 4) == []
    assert "blank or comment" in _errors(tmp_path, "mux.go", _GO, 2, 5)[0]
    assert "blank or comment" in _errors(tmp_path, "mux.go", _GO, 2, 6)[0]
    assert "runs past" in _errors(tmp_path, "mux.go", _GO, 2, 10)[0]
    assert _errors(tmp_path, "mux.go", _GO, 6, 10) == []


def test_brace_ranges_must_end_at_the_closing_line(tmp_path: Path) -> None:
    """The same holds for Java methods and JavaScript object members (a trailing blank line
    or the next method is not part of the answer); a wrapped parameter list is not a close."""
    java = """  @NonNull
  protected DecryptionResultHandler getInteractiveHandler(@NonNull final CipherStorage current,
                                                          @NonNull final PromptInfo promptInfo)
  {
    return DecryptionResultHandlerProvider.getHandler(current, promptInfo);
  }

  /* package */ void migrateCipherStorage(@NonNull final String service)
    throws KeyStoreAccessException {
    oldCipherStorage.removeKey(service);
  }
"""
    assert _errors(tmp_path, "K.java", java, 1, 6) == []
    assert _errors(tmp_path, "K.java", java, 8, 11) == []
    assert "runs past" in _errors(tmp_path, "K.java", java, 1, 11)[0]
    js = """const errors = {
  buildMismatchTokenMessage({ expected, actual }) {
    return `Expecting ${expected} but found ${actual}`;
  },

  buildNotAllInputParsedMessage({ firstRedundant }) {
    return firstRedundant;
  },
};
"""
    assert _errors(tmp_path, "e.js", js, 2, 4) == []
    assert "blank or comment" in _errors(tmp_path, "e.js", js, 2, 5)[0]
    assert "runs past" in _errors(tmp_path, "e.js", js, 2, 8)[0]


def test_ts_type_that_goes_on_after_a_closed_line_is_not_cut(tmp_path: Path) -> None:
    """A conditional type or an annotated const goes on after a line where brackets close."""
    source = """export type Sum<A extends number, B extends number> = number extends A | B
	? number
	: [
		IsEqual<A, PositiveInfinity>,
	] extends infer R extends [boolean]
		? PositiveInfinity
		: never;
"""
    assert _errors(tmp_path, "sum.d.ts", source, 1, 7) == []


@pytest.mark.parametrize(
    ("name", "source", "head"),
    [
        ("a.rs", "/// Returns true if\n/// it should.\n#[inline]\nfn cmp(self) -> bool {\n}\n", 4),
        ("a.java", "/**\n * Invoke.\n */\n@Override\npublic void run() {\n}\n", 5),
        ("a.ts", "/** The key. */\nexport function hashKey(k: string): string {\n}\n", 2),
        ("a.js", "// Add all mutator functions.\nfunction mutate(name) {\n}\n", 2),
        (
            "a.c",
            "/* Grow the buffer.\n   Return 0 on success\n*/\nstatic int\ngrow(int n)\n{\n}\n",
            4,
        ),
        ("a.go", "// NewRouter returns a router.\nfunc NewRouter() *Router {\n}\n", 2),
    ],
)
def test_gold_may_start_at_the_doc_comment(
    tmp_path: Path, name: str, source: str, head: int
) -> None:
    """Doc comments, comments and attributes directly above a definition belong to it."""
    lines = source.splitlines()
    language = gold_syntax.language_of(name)
    assert language is not None
    assert gold_syntax.skip_attributes(language, lines, 1, len(lines)) == head
    assert _errors(tmp_path, name, source, 1, len(lines)) == []


def test_comment_above_a_statement_or_blank_line_is_not_a_definition(tmp_path: Path) -> None:
    """A comment only joins the definition right below it."""
    source = "// cleanup\n\nfunction f() {\n}\n// then\nif (ready) f();\n"
    assert len(_errors(tmp_path, "a.js", source, 1, 4)) == 1
    assert len(_errors(tmp_path, "a.js", source, 5, 6)) == 1


def test_kind_key_is_accepted_only_by_the_harmless_checker(tmp_path: Path) -> None:
    """The harmless set's `kind` key passes its own checker and fails the written one."""
    from bench.questions.harmless import check as harmless

    row = {
        "id": "h_x-001",
        "lang": "en",
        "type": "lookup",
        "query": "Where is the token signature verified?",
        "gold": [{"file": "a.go", "start_line": 1, "end_line": 2}],
        "kind": "security-feature",
    }
    written = check_questions.Checker(fetch_sources=False, written=True)
    written.check_question("w", "h_x", row, None, set())
    assert len(written.errors) == 1 and "keys must be" in written.errors[0]
    checker = harmless.HarmlessChecker(fetch_sources=False)
    checker.check_question("h", "h_x", row, None, set())
    assert checker.errors == []


def test_rust_body_after_a_where_clause_ends_the_definition(tmp_path: Path) -> None:
    """indexmap's `where S2: BuildHasher,` then `{`: the brace opens the body even after a
    comma, so a range that goes on into the next method is caught."""
    source = """    /// Returns `true` if all elements of `self` are contained in `other`.
    pub fn is_subset<S2>(&self, other: &IndexSet<T, S2>) -> bool
    where
        S2: BuildHasher,
    {
        self.len() <= other.len() && self.iter().all(move |value| other.contains(value))
    }

    /// Returns `true` if all elements of `other` are contained in `self`.
    pub fn is_superset<S2>(&self, other: &IndexSet<T, S2>) -> bool
    where
        S2: BuildHasher,
    {
        other.is_subset(self)
    }
"""
    assert _errors(tmp_path, "set.rs", source, 1, 7) == []
    assert _errors(tmp_path, "set.rs", source, 9, 15) == []
    assert "runs past" in _errors(tmp_path, "set.rs", source, 1, 15)[0]


def test_end_on_code_after_a_leading_comment_is_not_a_comment_line(tmp_path: Path) -> None:
    """reselect's `/* #__PURE__ */ createSelectorCreator(...)` ends a definition with code."""
    source = (
        "export const createSelector =\n  /* #__PURE__ */ createSelectorCreator(weakMapMemoize)\n"
    )
    assert _errors(tmp_path, "c.ts", source, 1, 2) == []


def test_c_type_line_with_an_attribute(tmp_path: Path) -> None:
    """libffi's `int FFI_HIDDEN __attribute__((ms_abi))` is a return type line too."""
    source = """int FFI_HIDDEN __attribute__((ms_abi))
ffi_closure_win64_inner(ffi_cif *cif, void *user_data)
{
  return 0;
}
"""
    assert _errors(tmp_path, "ffiw64.c", source, 1, 5) == []
    assert _errors(tmp_path, "ffiw64.c", source, 2, 5) == []
