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
           (subscript_expression) (binary_expression) (unary_expression) (ternary_expression)])) @definition.variable
  (#not-match? @name "^[A-Z][A-Z0-9_]*$"))
(program
  (export_statement declaration: (_ (variable_declarator
       name: (identifier) @name
       value: [(call_expression) (new_expression) (await_expression) (object) (array) (string)
           (template_string) (number) (true) (false) (null) (identifier) (member_expression)
           (subscript_expression) (binary_expression) (unary_expression) (ternary_expression)])) @definition.variable)
  (#not-match? @name "^[A-Z][A-Z0-9_]*$"))

(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (member_expression
    object: (_) @call.receiver
    property: [(property_identifier) (private_property_identifier)] @name)) @reference.call
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
