"""A declaration never outranks its implementation for "how does X work" (issue 42): the ranker
reads whether a unit declares without implementing, and whether the question asks for a
declaration ("what is the signature of X"), which still finds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from coderag_retriever.learned import ASKS_DECLARATION, is_declaration
from tests.conftest import indexed

SOURCES = {
    "types/model.d.ts": (
        "export declare class Model {\n"
        "  /** Saves the document to its collection, validating it first. */\n"
        "  save(options?: SaveOptions): Promise<this>;\n"
        "  /** Removes the document from its collection. */\n"
        "  deleteOne(): Promise<void>;\n"
        "}\n"
        "export interface SaveOptions {\n"
        "  validateBeforeSave?: boolean;\n"
        "}\n"
    ),
    "lib/model.js": (
        "'use strict';\n"
        "\n"
        "function Model(doc) {\n"
        "  this.doc = doc;\n"
        "}\n"
        "\n"
        "/** Saves the document to its collection, validating it first. */\n"
        "Model.prototype.save = function save(options) {\n"
        "  const opts = options || {};\n"
        "  if (opts.validateBeforeSave !== false) {\n"
        "    this.validate();\n"
        "  }\n"
        "  return this.collection.insertOne(this.doc);\n"
        "};\n"
        "\n"
        "/** Removes the document from its collection. */\n"
        "Model.prototype.deleteOne = function deleteOne() {\n"
        "  return this.collection.deleteOne({ _id: this.doc._id });\n"
        "};\n"
        "\n"
        "module.exports = Model;\n"
    ),
    "include/ring.h": (
        "#ifndef RING_H\n#define RING_H\n"
        "/* Pushes one byte into the ring buffer, overwriting the oldest when full. */\n"
        "int ring_push(struct ring *r, unsigned char byte);\n"
        "#endif\n"
    ),
    "src/ring.c": (
        '#include "ring.h"\n'
        "\n"
        "/* Pushes one byte into the ring buffer, overwriting the oldest when full. */\n"
        "int ring_push(struct ring *r, unsigned char byte) {\n"
        "    r->data[r->head] = byte;\n"
        "    r->head = (r->head + 1) % r->size;\n"
        "    if (r->head == r->tail) {\n"
        "        r->tail = (r->tail + 1) % r->size;\n"
        "    }\n"
        "    return 0;\n"
        "}\n"
    ),
}


@pytest.mark.parametrize(
    ("file", "kind", "text", "declared"),
    [
        ("types/model.d.ts", "method", "save(): Promise<this>;", True),
        ("stubs/api.pyi", "function", "def get(url: str) -> Response: ...", True),
        ("ring.h", "function", "int ring_push(struct ring *r, unsigned char b);", True),
        ("Store.java", "method", "void put(String key, byte[] value);", True),
        ("lib.rs", "method", "fn area(&self) -> f64;", True),
        ("base.py", "method", '@abstractmethod\ndef run(self):\n    """Run it."""\n    ...', True),
        ("base.py", "method", "def close(self):\n    raise NotImplementedError", True),
        (  # an overload whose signature wraps, as itsdangerous writes them (the fifth trial)
            "timed.py",
            "method",
            "    @t.overload\n    def unsign(  # type: ignore\n        self,\n"
            "        signed_value: str | bytes,\n        max_age: int | None = None,\n"
            "        return_timestamp: t.Literal[False] = False,\n    ) -> bytes: ...",
            True,
        ),
        (
            "timed.py",
            "method",
            "    def unsign(\n        self,\n        value: bytes,\n    ) -> bytes:\n"
            '        """Unsign it."""\n        ...',
            True,
        ),
        (  # the implementation under it
            "timed.py",
            "method",
            "    def unsign(\n        self,\n        signed_value: str | bytes,\n"
            "        max_age: int | None = None,\n    ) -> bytes:\n"
            "        value = super().unsign(signed_value)\n        return value",
            False,
        ),
        ("ring.c", "function", "int ring_push(struct ring *r) {\n  return 0;\n}", False),
        (
            "io.py",
            "function",
            "def f():\n    try:\n        g()\n    except E:\n        pass",
            False,
        ),
        ("model.d.ts", "interface", "interface SaveOptions {}", True),  # the file decides
        ("model.ts", "class", "class Model {}", False),
    ],
)
def test_what_declares_without_implementing(
    file: str, kind: str, text: str, declared: bool
) -> None:
    assert is_declaration(file, kind, text) is declared


def test_questions_that_ask_for_a_declaration() -> None:
    assert ASKS_DECLARATION.search("What is the signature of Model.save?")
    assert ASKS_DECLARATION.search("Model.save 的类型签名是什么？")
    assert not ASKS_DECLARATION.search("How does Model.save validate the document?")
    assert not ASKS_DECLARATION.search("Where is ring_push implemented?")


def _first_file(client, repo: str, query: str) -> str:
    body = client.post("/search", json={"repo": repo, "query": query, "top_k": 5}).json()
    return body["results"][0]["file"]


def test_the_implementation_comes_before_its_declaration(tmp_path: Path) -> None:
    with indexed(tmp_path / "decl", "decl", SOURCES) as client:
        assert _first_file(client, "decl", "How does Model.save work?") == "lib/model.js"
        assert _first_file(client, "decl", "where is save implemented") == "lib/model.js"
        assert _first_file(client, "decl", "How does ring_push handle a full buffer?") == (
            "src/ring.c"
        )
        # still found when the question asks for the declaration itself
        body = client.post(
            "/search",
            json={"repo": "decl", "query": "What is the signature of Model.save?", "top_k": 5},
        ).json()
        assert "types/model.d.ts" in [h["file"] for h in body["results"]]


CHILD = {
    "types/logger.d.ts": (
        "export interface LoggerExtras {\n"
        "  /**\n"
        "   * Creates a child logger. The child inherits the parent's serializers, level and\n"
        "   * stream; serializers given in options override the parent's ones of the same key,\n"
        "   * and the bindings are added to every line the child logs.\n"
        "   * @param bindings key-value pairs added to each log line\n"
        "   * @param options serializers and level of the child, overriding the parent's\n"
        "   */\n"
        "  child(bindings: Bindings, options?: ChildOptions): Logger;\n"
        "}\n"
    ),
    "lib/proto.js": (
        "'use strict';\n"
        "\n"
        "const proto = {\n"
        "  child (bindings, options) {\n"
        "    const instance = Object.create(this);\n"
        "    const parent = this.serializers;\n"
        "    const own = (options && options.serializers) || {};\n"
        "    instance.serializers = Object.assign({}, parent);\n"
        "    for (const key of Object.keys(own)) {\n"
        "      instance.serializers[key] = own[key];\n"
        "    }\n"
        "    instance.chindings = this.chindings + JSON.stringify(bindings).slice(1, -1);\n"
        "    return instance;\n"
        "  },\n"
        "  flush () {\n"
        "    this.stream.flushSync();\n"
        "  }\n"
        "};\n"
        "\n"
        "module.exports = proto;\n"
    ),
}


def test_an_implementation_comes_before_a_declaration_all_prose(tmp_path: Path) -> None:
    # issue 43's fourth trial: pino.d.ts's JSDoc for child led both encoders, and the answer
    # quoted a signature line instead of the code that merges the serializers
    with indexed(tmp_path / "child", "child", CHILD) as client:
        asked = "How does a child logger inherit the parent's serializers and override some?"
        assert _first_file(client, "child", asked) == "lib/proto.js"
        body = client.post(
            "/search",
            json={"repo": "child", "query": "What is the signature of child?", "top_k": 5},
        ).json()
        # still found when the question asks for the declaration itself
        assert "types/logger.d.ts" in [h["file"] for h in body["results"]], body["results"]
