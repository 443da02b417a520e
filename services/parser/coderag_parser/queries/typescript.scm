; Capture names: see python.scm. Also used for .tsx files.
(class_declaration
  name: (type_identifier) @name
  body: (class_body) @body) @definition.class

(abstract_class_declaration
  name: (type_identifier) @name
  body: (class_body) @body) @definition.class

(interface_declaration
  name: (type_identifier) @name
  body: (interface_body) @body) @definition.interface

(type_alias_declaration
  name: (type_identifier) @name
  value: (_) @body) @definition.type

(enum_declaration
  name: (identifier) @name
  body: (enum_body) @body) @definition.type

(method_definition
  name: [(property_identifier) (private_property_identifier) (computed_property_name)] @name
  parameters: (formal_parameters) @params
  return_type: [(type_annotation (_) @returns) (type_predicate_annotation (_) @returns)
                (asserts_annotation (_) @returns)]?
  body: (statement_block) @body) @definition.method

;; overload signatures (and ambient `declare function`): merged with the same-named definition
;; that follows them, or into one declaration when none does
(function_signature
  name: (identifier) @name
  parameters: (formal_parameters) @params
  return_type: [(type_annotation (_) @returns) (type_predicate_annotation (_) @returns)
                (asserts_annotation (_) @returns)]?) @definition.overload
(class_body
  (method_signature
    name: [(property_identifier) (private_property_identifier) (computed_property_name)] @name
    parameters: (formal_parameters) @params
    return_type: [(type_annotation (_) @returns) (type_predicate_annotation (_) @returns)
                  (asserts_annotation (_) @returns)]?) @definition.overload)
(abstract_method_signature
  name: [(property_identifier) (private_property_identifier) (computed_property_name)] @name
  parameters: (formal_parameters) @params
  return_type: [(type_annotation (_) @returns) (type_predicate_annotation (_) @returns)
                (asserts_annotation (_) @returns)]?) @definition.method

;; other class fields: documented ones between methods become units of their own
(class_body
  (public_field_definition
    name: [(property_identifier) (private_property_identifier) (computed_property_name)] @name) @definition.variable)

;; class fields holding a function (`handle = (e) => {...}`) are methods
(public_field_definition
  name: [(property_identifier) (private_property_identifier) (computed_property_name)] @name
  value: [(arrow_function
            [parameters: (formal_parameters) parameter: (identifier)] @params
            return_type: [(type_annotation (_) @returns) (type_predicate_annotation (_) @returns)
                          (asserts_annotation (_) @returns)]?
            body: (_) @body)
          (function_expression
            parameters: (formal_parameters) @params
            return_type: [(type_annotation (_) @returns) (type_predicate_annotation (_) @returns)
                          (asserts_annotation (_) @returns)]?
            body: (_) @body)]) @definition.method

(function_declaration
  name: (identifier) @name
  parameters: (formal_parameters) @params
  return_type: [(type_annotation (_) @returns) (type_predicate_annotation (_) @returns)
                (asserts_annotation (_) @returns)]?
  body: (statement_block) @body) @definition.function

(generator_function_declaration
  name: (identifier) @name
  parameters: (formal_parameters) @params
  return_type: [(type_annotation (_) @returns) (type_predicate_annotation (_) @returns)
                (asserts_annotation (_) @returns)]?
  body: (statement_block) @body) @definition.function

(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function
              [parameters: (formal_parameters) parameter: (identifier)] @params
              return_type: [(type_annotation (_) @returns) (type_predicate_annotation (_) @returns)
                            (asserts_annotation (_) @returns)]?
              body: (_) @body)
            (function_expression
              parameters: (formal_parameters) @params
              return_type: [(type_annotation (_) @returns) (type_predicate_annotation (_) @returns)
                            (asserts_annotation (_) @returns)]?
              body: (_) @body)])) @definition.function

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
           (as_expression) (satisfies_expression) (non_null_expression)])) @definition.variable
  (#not-match? @name "^[A-Z][A-Z0-9_]*$"))
(program
  (export_statement declaration: (_ (variable_declarator
       name: (identifier) @name
       value: [(call_expression) (new_expression) (await_expression) (object) (array) (string)
           (template_string) (number) (true) (false) (null) (identifier) (member_expression)
           (subscript_expression) (binary_expression) (unary_expression) (ternary_expression)
           (as_expression) (satisfies_expression) (non_null_expression)])) @definition.variable)
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
(import_require_clause source: (string (string_fragment) @name)) @import
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
