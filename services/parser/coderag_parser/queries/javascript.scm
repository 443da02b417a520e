; Capture names: see python.scm.
(class_declaration
  name: (identifier) @name
  body: (class_body) @body) @definition.class

(method_definition
  name: [(property_identifier) (private_property_identifier) (computed_property_name)] @name
  parameters: (formal_parameters) @params
  body: (statement_block) @body) @definition.method

;; class fields: a field holding a function is a method, a documented one between methods a unit
(class_body
  (field_definition
    property: [(property_identifier) (private_property_identifier) (computed_property_name)] @name) @definition.variable)
(field_definition
  property: [(property_identifier) (private_property_identifier) (computed_property_name)] @name
  value: [(arrow_function
            [parameters: (formal_parameters) parameter: (identifier)] @params body: (_) @body)
          (function_expression parameters: (formal_parameters) @params body: (_) @body)]) @definition.method

(function_declaration
  name: (identifier) @name
  parameters: (formal_parameters) @params
  body: (statement_block) @body) @definition.function

(generator_function_declaration
  name: (identifier) @name
  parameters: (formal_parameters) @params
  body: (statement_block) @body) @definition.function

(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function
              [parameters: (formal_parameters) parameter: (identifier)] @params body: (_) @body)
            (function_expression parameters: (formal_parameters) @params body: (_) @body)])) @definition.function

(variable_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function
              [parameters: (formal_parameters) parameter: (identifier)] @params body: (_) @body)
            (function_expression parameters: (formal_parameters) @params body: (_) @body)])) @definition.function

; top-level let/const/var: UPPER_CASE names are constants, others (unless functions) variables
(program (_ (variable_declarator name: (identifier) @name)) @definition.constant
  (#match? @name "^[A-Z][A-Z0-9_]*$"))
(program
  (export_statement declaration: (_ (variable_declarator name: (identifier) @name)) @definition.constant)
  (#match? @name "^[A-Z][A-Z0-9_]*$"))
(program
  (_ (variable_declarator
       name: (identifier) @name
       value: [(call_expression) (new_expression) (await_expression) (object) (array) (string)
           (template_string) (number) (true) (false) (null) (identifier) (member_expression)
           (subscript_expression) (binary_expression) (unary_expression) (ternary_expression)
           (parenthesized_expression)])) @definition.variable
  (#not-match? @name "^[A-Z][A-Z0-9_]*$"))
(program
  (export_statement declaration: (_ (variable_declarator
       name: (identifier) @name
       value: [(call_expression) (new_expression) (await_expression) (object) (array) (string)
           (template_string) (number) (true) (false) (null) (identifier) (member_expression)
           (subscript_expression) (binary_expression) (unary_expression) (ternary_expression)
           (parenthesized_expression)])) @definition.variable)
  (#not-match? @name "^[A-Z][A-Z0-9_]*$"))

;; ---- JavaScript idioms: definitions written as assignments, object literals and calls ----
;; `X.prototype.m = function () {}` is the method `X.m`
(expression_statement
  (assignment_expression
    left: (member_expression
      object: (member_expression
        object: [(identifier) (member_expression)] @receiver
        property: (property_identifier) @_proto)
      property: [(property_identifier) (private_property_identifier)] @name)
    right: [(function_expression parameters: (formal_parameters) @params body: (_) @body)
            (arrow_function [parameters: (formal_parameters) parameter: (identifier)] @params body: (_) @body)])
  (#eq? @_proto "prototype")) @definition.method

;; static assignments `X.m = function () {}` are `X.m`; `exports.x` and `module.exports.x` are `x`
(expression_statement
  (assignment_expression
    left: (member_expression
      object: [(identifier) (member_expression)] @receiver
      property: [(property_identifier) (private_property_identifier)] @name)
    right: [(function_expression parameters: (formal_parameters) @params body: (_) @body)
            (arrow_function [parameters: (formal_parameters) parameter: (identifier)] @params body: (_) @body)])
  (#not-match? @receiver "(^|\\.)prototype$|^(module\\.)?exports$|^this$|^module$")
  (#not-eq? @name "prototype")) @definition.function
(expression_statement
  (assignment_expression
    left: (member_expression
      object: [(identifier) (member_expression)] @_exports
      property: (property_identifier) @name)
    right: [(function_expression parameters: (formal_parameters) @params body: (_) @body)
            (arrow_function [parameters: (formal_parameters) parameter: (identifier)] @params body: (_) @body)])
  (#match? @_exports "^(module\\.)?exports$")) @definition.function
(expression_statement
  (assignment_expression
    left: (member_expression
      object: [(identifier) (member_expression)] @_exports
      property: (property_identifier) @name)
    right: (class body: (class_body) @body))
  (#match? @_exports "^(module\\.)?exports$")) @definition.class

;; `module.exports = function name () {}` and `module.exports = class Name {}`
(expression_statement
  (assignment_expression
    left: (member_expression object: (identifier) @_module property: (property_identifier) @_exports)
    right: (function_expression name: (identifier) @name parameters: (formal_parameters) @params body: (_) @body))
  (#eq? @_module "module") (#eq? @_exports "exports")) @definition.function
(expression_statement
  (assignment_expression
    left: (member_expression object: (identifier) @_module property: (property_identifier) @_exports)
    right: (class name: (_) @name body: (class_body) @body))
  (#eq? @_module "module") (#eq? @_exports "exports")) @definition.class

;; named class expressions (`const A = class A {}`, `exports.A = class A {}`) are classes
(variable_declarator
  value: (class name: (_) @name body: (class_body) @body) @definition.class)

;; object literals holding functions are containers: `const methods = { push() {} }` holds
;; `methods.push`, `Base.cursor = { hide: function () {} }` `Base.cursor.hide`,
;; `X.prototype = { m() {} }` `X.m`; the members of `module.exports = {...}` stand alone
(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: (object [(method_definition)
                    (pair value: [(function_expression) (arrow_function)])]) @body)) @definition.object
(variable_declaration
  (variable_declarator
    name: (identifier) @name
    value: (object [(method_definition)
                    (pair value: [(function_expression) (arrow_function)])]) @body)) @definition.object
(expression_statement
  (assignment_expression
    left: (member_expression
      object: [(identifier) (member_expression)] @receiver
      property: (property_identifier) @name)
    right: (object [(method_definition)
                    (pair value: [(function_expression) (arrow_function)])]) @body)
  (#not-match? @receiver "(^|\\.)prototype$|^(module\\.)?exports$|^this$|^module$")
  (#not-eq? @name "prototype")) @definition.object
(expression_statement
  (assignment_expression
    left: (member_expression
      object: [(identifier) (member_expression)] @name
      property: (property_identifier) @_proto)
    right: (object [(method_definition)
                    (pair value: [(function_expression) (arrow_function)])]) @body)
  (#eq? @_proto "prototype")) @definition.object
(pair
  key: [(property_identifier) @name (string (string_fragment) @name)]
  value: (object [(method_definition)
                  (pair value: [(function_expression) (arrow_function)])]) @body) @definition.object

;; function-valued properties of an object literal are its methods
(pair
  key: [(property_identifier) @name (string (string_fragment) @name) (computed_property_name) @name (number) @name]
  value: [(function_expression parameters: (formal_parameters) @params body: (_) @body)
          (arrow_function [parameters: (formal_parameters) parameter: (identifier)] @params body: (_) @body)]) @definition.method

;; `Object.defineProperty(X.prototype, 'y', { get() {} })` is `X.y`, on an object `X.y` too
;; (a descriptor holding functions: `{ value: true }` defines no code)
(expression_statement
  (call_expression
    function: (member_expression object: (identifier) @_object property: (property_identifier) @_define)
    arguments: (arguments
      .
      (member_expression
        object: [(identifier) (member_expression)] @receiver
        property: (property_identifier) @_proto)
      .
      (string (string_fragment) @name)
      .
      (object [(method_definition)
               (pair value: [(function_expression) (arrow_function)])]) @body))
  (#eq? @_object "Object") (#eq? @_define "defineProperty") (#eq? @_proto "prototype")) @definition.method
(expression_statement
  (call_expression
    function: (member_expression object: (identifier) @_object property: (property_identifier) @_define)
    arguments: (arguments
      .
      [(identifier) (member_expression)] @receiver
      .
      (string (string_fragment) @name)
      .
      (object [(method_definition)
               (pair value: [(function_expression) (arrow_function)])]) @body))
  (#eq? @_object "Object") (#eq? @_define "defineProperty")
  (#not-match? @receiver "(^|\\.)prototype$")) @definition.method

;; `X.prototype.m = other` (`= f`, `= X.prototype.n`, `= require('./m')`) names a method too
(expression_statement
  (assignment_expression
    left: (member_expression
      object: (member_expression
        object: [(identifier) (member_expression)] @receiver
        property: (property_identifier) @_proto)
      property: [(property_identifier) (private_property_identifier)] @name)
    right: [(identifier) (member_expression) (call_expression) (assignment_expression)])
  (#eq? @_proto "prototype")) @definition.method

;; `name = function () {}`: a variable given its function later (`if (...) { getTag = ... }`)
(expression_statement
  (assignment_expression
    left: (identifier) @name
    right: [(function_expression parameters: (formal_parameters) @params body: (_) @body)
            (arrow_function [parameters: (formal_parameters) parameter: (identifier)] @params body: (_) @body)])) @definition.function

;; a named function handed to a top-level call (`defineGetter(req, 'host', function host() {})`)
(program
  (expression_statement
    (call_expression
      arguments: (arguments
        (function_expression
          name: (identifier) @name
          parameters: (formal_parameters) @params
          body: (_) @body) @definition.function))))
(program
  (expression_statement
    (call_expression
      arguments: (arguments
        (call_expression
          arguments: (arguments
            (function_expression
              name: (identifier) @name
              parameters: (formal_parameters) @params
              body: (_) @body) @definition.function))))))

;; a method named by a string (`'on-close'(event) {}`)
(method_definition
  name: (string (string_fragment) @name)
  parameters: (formal_parameters) @params
  body: (statement_block) @body) @definition.method

;; a class's static initialisation block is `X.static`
(class_static_block "static" @name body: (statement_block) @body) @definition.method

(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (member_expression
    object: (_) @call.receiver
    property: [(property_identifier) (private_property_identifier)] @name)) @reference.call
;; symbol-keyed dispatch (`this[writeSym](obj)`): the callee is named by its key, `[writeSym]`,
;; as a computed method or a `[writeSym]: write` entry names it (issue 43's fourth trial)
(call_expression
  function: (subscript_expression
    object: (_) @call.receiver
    index: [(identifier) (member_expression)] @name)) @reference.call
(new_expression constructor: (identifier) @name) @reference.call
(new_expression
  constructor: (member_expression object: (_) @call.receiver property: (property_identifier) @name)) @reference.call

(import_statement source: (string (string_fragment) @name)) @import
(export_statement source: (string (string_fragment) @name)) @import
(call_expression
  function: (identifier) @_req
  arguments: (arguments . (string (string_fragment) @name))
  (#eq? @_req "require")) @import
(call_expression function: (import) arguments: (arguments . (string (string_fragment) @name))) @import

(catch_clause) @fact.error
(throw_statement) @fact.error
(call_expression
  function: (member_expression property: (property_identifier) @_catch)
  (#eq? @_catch "catch")) @fact.error

(member_expression
  object: (member_expression object: (identifier) @_proc property: (property_identifier) @_env)
  (#eq? @_proc "process") (#eq? @_env "env")) @fact.config
(subscript_expression
  object: (member_expression object: (identifier) @_proc property: (property_identifier) @_env)
  (#eq? @_proc "process") (#eq? @_env "env")) @fact.config
(variable_declarator
  name: (object_pattern)
  value: (member_expression object: (identifier) @_proc property: (property_identifier) @_env)
  (#eq? @_proc "process") (#eq? @_env "env")) @fact.config
(member_expression
  object: (member_expression object: (meta_property) property: (property_identifier) @_env)
  (#eq? @_env "env")) @fact.config
(member_expression object: (identifier) @_cfg
  (#match? @_cfg "^(cfg|conf|config|settings|SETTINGS|CONFIG)$")) @fact.config
(member_expression object: (member_expression property: (property_identifier) @_cfg)
  (#match? @_cfg "^(cfg|conf|config|settings)$")) @fact.config

(member_expression object: (identifier) @_ctx (#match? @_ctx "^(ctx|context)$")) @fact.context

;; a function stored under a computed key (`{ [writeSym]: write }`, `proto[writeSym] = write`):
;; the key names the function too, so `this[writeSym](...)` calls it
(pair key: (computed_property_name) @alias.key value: (identifier) @alias.target) @alias
(assignment_expression
  left: (subscript_expression index: [(identifier) (member_expression)] @alias.key)
  right: (identifier) @alias.target) @alias
