"""A question that names the repository's own project, as users do ("How does loglet keep
passwords out of the log?"), is about the rest of what it says: the name does not draw the units
called after the project (its factory, its type declaration) above the code the question asks
for (issue 43's fourth trial, on pino); a question that says only the name keeps it."""

from __future__ import annotations

from pathlib import Path

from coderag_retriever.text import query_tokens, without_name
from tests.conftest import indexed

SOURCES = {
    "loglet.js": (
        "'use strict';\n"
        "\n"
        "const { redaction } = require('./lib/redaction');\n"
        "const { levels } = require('./lib/levels');\n"
        "\n"
        "/**\n"
        " * Creates a loglet logger: the options choose the level, the destination stream,\n"
        " * the serializers and the paths to redact from each log line.\n"
        " */\n"
        "function loglet(options, stream) {\n"
        "  const opts = Object.assign({ level: 'info' }, options);\n"
        "  const redact = opts.redact ? redaction(opts.redact) : null;\n"
        "  const logger = { level: opts.level, stream: stream || process.stdout, redact };\n"
        "  logger.levels = levels;\n"
        "  return logger;\n"
        "}\n"
        "\n"
        "module.exports = loglet;\n"
    ),
    "loglet.d.ts": (
        "/**\n"
        " * Creates a loglet logger. Options choose the level, the destination, serializers,\n"
        " * and the redact paths whose values are kept out of the log output.\n"
        " */\n"
        "declare function loglet(options?: LoggerOptions, stream?: DestinationStream): Logger;\n"
        "export = loglet;\n"
    ),
    "lib/redaction.js": (
        "'use strict';\n"
        "\n"
        "const CENSOR = '[Redacted]';\n"
        "\n"
        "function redaction(opts) {\n"
        "  const paths = Array.isArray(opts) ? opts : opts.paths;\n"
        "  const censor = opts.censor === undefined ? CENSOR : opts.censor;\n"
        "  // compile each path once into the keys it walks, so that every line can mask\n"
        "  // a password or token held there without parsing the path again\n"
        "  const compiled = paths.map((path) => path.split('.'));\n"
        "  return function mask(obj) {\n"
        "    for (const keys of compiled) {\n"
        "      let target = obj;\n"
        "      for (const key of keys.slice(0, -1)) target = target && target[key];\n"
        "      const last = keys[keys.length - 1];\n"
        "      if (target && last in target) target[last] = censor;\n"
        "    }\n"
        "    return obj;\n"
        "  };\n"
        "}\n"
        "\n"
        "module.exports = { redaction, CENSOR };\n"
    ),
    "lib/levels.js": (
        "'use strict';\n"
        "\n"
        "const levels = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };\n"
        "\n"
        "function isLevelEnabled(logger, level) {\n"
        "  return levels[level] >= levels[logger.level];\n"
        "}\n"
        "\n"
        "module.exports = { levels, isLevelEnabled };\n"
    ),
}


def test_the_repository_name_is_dropped_only_when_the_question_says_more() -> None:
    text = "How does loglet keep passwords out of the log output?"
    asked = query_tokens(text)
    assert "loglet" in asked and "loglet" not in without_name(asked, "loglet", text)
    assert "loglet" not in without_name(asked, "loglet@v2", text)  # a ref of the repository
    only = "How does loglet work?"
    assert without_name(query_tokens(only), "loglet", only) == query_tokens(only)
    # a name the question does not hold, or holds in part, changes nothing
    assert without_name(asked, "pino", text) == asked
    assert without_name(asked, "loglet-core", text) == asked
    # nor a common noun that names the repository
    noun = "When does the shop ship parcels to the moon?"
    assert without_name(query_tokens(noun), "shop", noun) == query_tokens(noun)


def _files(client, query: str) -> list[str]:
    body = client.post("/search", json={"repo": "loglet", "query": query, "top_k": 5}).json()
    return [h["file"] for h in body["results"]]


def test_a_question_naming_the_project_finds_what_it_asks_about(tmp_path: Path) -> None:
    with indexed(tmp_path / "loglet", "loglet", SOURCES) as client:
        asked = "How does loglet keep passwords out of the log output, and where are the redact paths compiled?"  # noqa: E501
        assert _files(client, asked)[0] == "lib/redaction.js", _files(client, asked)
        assert _files(client, "How does loglet work?")[0] in ("loglet.js", "loglet.d.ts")
