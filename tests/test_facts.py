"""Semantic facts per unit, symbols, call sites and imports, read from each language's query."""

from __future__ import annotations

from textwrap import dedent

from coderag.schemas import Unit
from coderag_parser.parsed import ParsedFile
from coderag_parser.units import parse_source


def parse(language: str, path: str, source: str) -> ParsedFile:
    return parse_source("r", path, language, dedent(source).lstrip("\n"))


def unit(parsed: ParsedFile, symbol: str) -> Unit:
    return next(u for u in parsed.units if u.symbol == symbol)


def unit_with(parsed: ParsedFile, line: str) -> Unit:
    """The unit quoting a line (module-level code has no symbol of its own to look it up by)."""
    return next(u for u in parsed.units if line in u.text.splitlines())


def callees(parsed: ParsedFile, caller: Unit) -> list[tuple[str, str, str]]:
    return [
        (c["receiver"], c["callee"], c["receiver_type"])
        for c in parsed.calls
        if c["caller"] == caller.id
    ]


def symbols(parsed: ParsedFile, kind: str) -> list[str]:
    return [s["name"] for s in parsed.symbols if s["kind"] == kind]


def test_python() -> None:
    parsed = parse(
        "python",
        "app/orders.py",
        """
        import os
        from app.db import save

        MAX_RETRIES = int(os.getenv("MAX_RETRIES", "3"))


        class A:
            def run(self, order):
                try:
                    self.helper(order)
                except KeyError:
                    raise ValueError("bad order")
                return settings.timeout

            def _helper(self, order):
                return ctx.user

            # Deprecated: use run
            def old(self):
                return save()
        """,
    )
    run = unit(parsed, "A.run").facts
    assert run["error"] == [
        'except KeyError: raise ValueError("bad order")',
        'raise ValueError("bad order")',
    ]
    assert run["config"] == ["settings.timeout"]
    assert "self.helper (A)" in run["calls"]
    assert ("self", "helper", "A") in callees(parsed, unit(parsed, "A.run"))
    assert run["signature"] == {
        "name": "run",
        "receiver": "",
        "params": "(self, order)",
        "returns": "",
        "exported": True,
    }
    assert "deprecated" not in run
    helper = unit(parsed, "A._helper").facts
    assert helper["context"] == ["ctx.user"]
    assert helper["signature"]["exported"] is False
    assert unit(parsed, "A.old").facts["deprecated"] == "Deprecated: use run"
    assert unit_with(parsed, 'MAX_RETRIES = int(os.getenv("MAX_RETRIES", "3"))').facts[
        "config"
    ] == ['os.getenv("MAX_RETRIES", "3")']
    assert parsed.imports == ["os", "app.db"]
    assert "MAX_RETRIES" in symbols(parsed, "constant")


def test_go() -> None:
    parsed = parse(
        "go",
        "orders/service.go",
        """
        package orders

        import (
            "context"
            "os"
        )

        const MaxItems = 50

        type Service struct{ db DB }

        func (s *Service) ProcessOrder(ctx context.Context, id int) error {
            if err := s.validate(id); err != nil {
                return err
            }
            region := os.Getenv("ORDER_REGION")
            s.logOrderProcessed(ctx.Value("user"), region)
            return nil
        }

        // Deprecated: use ProcessOrder.
        func legacyProcess() {}
        """,
    )
    proc = unit(parsed, "(*Service).ProcessOrder")
    facts = proc.facts
    assert facts["error"] == ["if err := s.validate(id); err != nil { return err }"]
    assert facts["config"] == ['os.Getenv("ORDER_REGION")']
    assert facts["context"] == ["ctx.Value"]
    assert "s.logOrderProcessed (*Service)" in facts["calls"]
    assert ("s", "logOrderProcessed", "*Service") in callees(parsed, proc)
    assert facts["signature"] == {
        "name": "ProcessOrder",
        "receiver": "(s *Service)",
        "params": "(ctx context.Context, id int)",
        "returns": "error",
        "exported": True,
    }
    legacy = unit(parsed, "legacyProcess").facts
    assert legacy["deprecated"] == "Deprecated: use ProcessOrder."
    assert legacy["signature"]["exported"] is False
    assert parsed.imports == ["context", "os"]
    assert symbols(parsed, "constant") == ["MaxItems"]


def test_java() -> None:
    parsed = parse(
        "java",
        "src/main/java/com/example/OrderService.java",
        """
        package com.example;

        import java.util.List;
        import com.example.db.Repo;

        public class OrderService {
            public static final int MAX_ITEMS = 50;

            public void process(Context ctx, Order order) {
                try {
                    this.validate(order);
                } catch (IllegalArgumentException e) {
                    throw new OrderException(e);
                }
                String region = System.getenv("ORDER_REGION");
                ctx.log(region);
            }

            /** @deprecated use process */
            @Deprecated
            List<Order> legacy(Order order) {
                return repo.findAll(config.region);
            }

            private void validate(Order order) {}
        }
        """,
    )
    process = unit(parsed, "OrderService.process")
    facts = process.facts
    assert facts["error"] == [
        "catch (IllegalArgumentException e) { throw new OrderException(e); }",
        "throw new OrderException(e);",
    ]
    assert facts["config"] == ['System.getenv("ORDER_REGION")']
    assert facts["context"] == ["ctx.log(region)"]
    assert set(facts["calls"]) == {
        "this.validate (OrderService)",
        "OrderException",
        "System.getenv",
        "ctx.log (Context)",  # the parameter says its type
    }
    assert ("this", "validate", "OrderService") in callees(parsed, process)
    assert facts["signature"] == {
        "name": "process",
        "receiver": "",
        "params": "(Context ctx, Order order)",
        "returns": "void",
        "exported": True,
    }
    assert "deprecated" not in facts
    legacy = unit(parsed, "OrderService.legacy").facts
    assert legacy["deprecated"] == "@deprecated use process"
    assert legacy["config"] == ["config.region"]
    assert legacy["signature"]["returns"] == "List<Order>"
    assert legacy["signature"]["exported"] is False
    assert parsed.imports == ["java.util.List", "com.example.db.Repo"]
    assert symbols(parsed, "constant") == ["MAX_ITEMS"]


def test_javascript() -> None:
    parsed = parse(
        "javascript",
        "web/orders.js",
        """
        import { save } from "./db";
        const axios = require("axios");

        const API_URL = process.env.API_URL;

        export class OrderClient {
          async create(ctx, order) {
            try {
              await this.validate(order);
              return await save(order, ctx.user);
            } catch (err) {
              throw new Error(`create failed: ${err.message}`);
            }
          }

          /** @deprecated use create */
          legacy(order) {
            return axios.post(`${config.baseUrl}/orders`, order);
          }
        }

        function _internal() {}
        """,
    )
    create = unit(parsed, "OrderClient.create")
    facts = create.facts
    assert facts["error"] == [
        "catch (err) { throw new Error(`create failed: ${err.message}`); }",
        "throw new Error(`create failed: ${err.message}`);",
    ]
    assert facts["context"] == ["ctx.user"]
    assert set(facts["calls"]) == {"this.validate (OrderClient)", "save", "Error"}
    assert ("this", "validate", "OrderClient") in callees(parsed, create)
    assert facts["signature"]["params"] == "(ctx, order)"
    assert facts["signature"]["exported"] is True
    legacy = unit(parsed, "OrderClient.legacy").facts
    assert legacy["deprecated"] == "@deprecated use create"
    assert legacy["config"] == ["config.baseUrl"]
    assert legacy["calls"] == ["axios.post"]
    assert unit(parsed, "_internal").facts["signature"]["exported"] is False
    assert unit_with(parsed, "const API_URL = process.env.API_URL;").facts["config"] == [
        "process.env.API_URL"
    ]
    assert parsed.imports == ["./db", "axios"]
    assert symbols(parsed, "constant") == ["API_URL"]
    assert symbols(parsed, "variable") == ["axios"]


def test_typescript() -> None:
    parsed = parse(
        "typescript",
        "web/submit.ts",
        """
        import type { Order } from "./types";
        import { log } from "@app/log";

        export const MAX_ITEMS: number = 50;

        export async function submit(ctx: Context, order: Order): Promise<string> {
          if (order.items.length > MAX_ITEMS) {
            throw new RangeError("too many items");
          }
          const region = process.env.ORDER_REGION ?? "eu";
          return ctx.client.post(region, order).catch((e: Error) => log.error(e));
        }

        /** @deprecated use submit */
        export function legacySubmit(order: Order): void {
          submit(defaultContext, order);
        }
        """,
    )
    facts = unit(parsed, "submit").facts
    assert facts["error"] == [
        'throw new RangeError("too many items");',
        "ctx.client.post(region, order).catch((e: Error) => log.error(e))",
    ]
    assert facts["config"] == ["process.env.ORDER_REGION"]
    assert facts["context"] == ["ctx.client"]
    assert set(facts["calls"]) == {
        "RangeError",
        "ctx.client.post(region, order).catch",
        "ctx.client.post",
        "log.error",
    }
    assert facts["signature"] == {
        "name": "submit",
        "receiver": "",
        "params": "(ctx: Context, order: Order)",
        "returns": "Promise<string>",
        "exported": True,
    }
    legacy = unit(parsed, "legacySubmit").facts
    assert legacy["deprecated"] == "@deprecated use submit"
    assert legacy["calls"] == ["submit"]
    assert legacy["signature"]["returns"] == "void"
    assert parsed.imports == ["./types", "@app/log"]
    assert symbols(parsed, "constant") == ["MAX_ITEMS"]


def test_rust() -> None:
    parsed = parse(
        "rust",
        "src/orders.rs",
        """
        use std::env;
        use crate::store::{Store, StoreError};

        pub const MAX_ITEMS: usize = 50;

        pub struct OrderService {
            store: Box<dyn Store>,
        }

        impl OrderService {
            pub fn create(&self, order: Order) -> Result<u64, StoreError> {
                self.validate(&order)?;
                let region = env::var("ORDER_REGION").expect("ORDER_REGION not set");
                self.store.save(&order, &region)
            }

            // Deprecated: use create
            fn legacy(&self, order: Order) -> u64 {
                self.create(order).unwrap()
            }

            fn validate(&self, order: &Order) -> Result<(), StoreError> {
                if order.items.is_empty() {
                    panic!("empty order");
                }
                Ok(())
            }
        }

        pub trait Store {
            fn save(&self, order: &Order, region: &str) -> Result<u64, StoreError>;

            fn ping(&self) -> bool {
                true
            }
        }
        """,
    )
    assert [(u.symbol, u.kind) for u in parsed.units if u.kind not in ("block", "file")] == [
        ("MAX_ITEMS", "constant"),
        ("OrderService", "type"),
        ("OrderService", "class"),
        ("OrderService.create", "method"),
        ("OrderService.legacy", "method"),
        ("OrderService.validate", "method"),
        ("Store", "interface"),
        ("Store.save", "method"),
        ("Store.ping", "method"),
    ]
    create = unit(parsed, "OrderService.create")
    facts = create.facts
    assert facts["error"] == [
        "self.validate(&order)?",
        'env::var("ORDER_REGION").expect("ORDER_REGION not set")',
    ]
    assert facts["config"] == ['env::var("ORDER_REGION")']
    assert "context" not in facts
    assert set(facts["calls"]) == {
        "self.validate (OrderService)",
        'env::var("ORDER_REGION").expect',
        "env.var",
        "self.store.save",
    }
    assert ("self", "validate", "OrderService") in callees(parsed, create)
    assert facts["signature"] == {
        "name": "create",
        "receiver": "",
        "params": "(&self, order: Order)",
        "returns": "Result<u64, StoreError>",
        "exported": True,
    }
    legacy = unit(parsed, "OrderService.legacy").facts
    assert legacy["deprecated"] == "Deprecated: use create"
    assert legacy["error"] == ["self.create(order).unwrap()"]
    assert legacy["signature"]["exported"] is False
    validate = unit(parsed, "OrderService.validate").facts
    assert validate["error"] == ['panic!("empty order")']
    assert set(validate["calls"]) == {"order.items.is_empty", "panic"}
    assert parsed.imports == ["std::env", "crate::store"]
    assert symbols(parsed, "constant") == ["MAX_ITEMS"]


def test_c() -> None:
    parsed = parse(
        "c",
        "src/orders.c",
        """
        #include <stdlib.h>
        #include "orders.h"

        #define MAX_ITEMS 50

        static int verbose = 0;

        int order_submit(struct order *o)
        {
            const char *region = getenv("ORDER_REGION");
            if (o->items > MAX_ITEMS) {
                return -1;
            }
            if (store_save(o, cfg->region) != 0) {
                perror("store_save");
                goto fail;
            }
            return 0;
        fail:
            order_free(o);
            return -1;
        }

        // Deprecated: use order_submit
        static struct order *order_submit_legacy(struct order *o)
        {
            return order_submit(o) == 0 ? o : NULL;
        }
        """,
    )
    facts = unit(parsed, "order_submit").facts
    assert facts["error"] == [
        "if (o->items > MAX_ITEMS) { return -1; }",
        'perror("store_save")',
        "goto fail;",
    ]
    assert facts["config"] == ['getenv("ORDER_REGION")', "cfg->region"]
    assert "context" not in facts
    assert set(facts["calls"]) == {"getenv", "store_save", "perror", "order_free"}
    assert facts["signature"] == {
        "name": "order_submit",
        "receiver": "",
        "params": "(struct order *o)",
        "returns": "int",
        "exported": True,
    }
    legacy = unit(parsed, "order_submit_legacy").facts
    assert legacy["deprecated"] == "Deprecated: use order_submit"
    assert set(legacy["calls"]) == {"order_submit"}
    assert legacy["signature"]["exported"] is False
    assert parsed.imports == ["stdlib.h", "orders.h"]
    assert symbols(parsed, "constant") == ["MAX_ITEMS"]
    assert symbols(parsed, "variable") == ["verbose"]


def test_rust_doc_comments_and_attributes_join_the_definition() -> None:
    parsed = parse(
        "rust",
        "src/orders.rs",
        """
        /// Creates an order.
        #[deprecated(note = "use submit")]
        pub fn create() {}
        """,
    )
    create = unit(parsed, "create")
    assert (create.start_line, create.doc) == (1, "Creates an order.")
    assert "deprecated" in create.facts


def test_a_deprecated_method_does_not_deprecate_its_class() -> None:
    parsed = parse(
        "java",
        "src/main/java/A.java",
        """
        public class A {
            @Deprecated
            public void old() {}
        }
        """,
    )
    assert "deprecated" not in unit(parsed, "A").facts
