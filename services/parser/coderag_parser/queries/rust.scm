; Capture names: see python.scm. An impl block is a container named after its type (so its
; functions come out as `Type.method`), a trait is an interface; functions are definition.function
; and become methods inside either.
(function_item
  name: (identifier) @name
  parameters: (parameters) @params
  return_type: (_)? @returns
  body: (block) @body) @definition.function

; a trait's required methods (`fn f(&self);`) are methods like its provided ones
(declaration_list
  (function_signature_item
    name: (identifier) @name
    parameters: (parameters) @params
    return_type: (_)? @returns) @definition.function)

(macro_definition name: (identifier) @name) @definition.function

(impl_item
  type: [(type_identifier) @name
         (scoped_type_identifier name: (type_identifier) @name)
         (generic_type type: [(type_identifier) @name
                              (scoped_type_identifier name: (type_identifier) @name)])]
  body: (declaration_list) @body) @definition.class

(trait_item
  name: (type_identifier) @name
  body: (declaration_list) @body) @definition.interface

(struct_item name: (type_identifier) @name body: (_)? @body) @definition.type
(union_item name: (type_identifier) @name body: (_) @body) @definition.type
(enum_item name: (type_identifier) @name body: (enum_variant_list) @body) @definition.type
(type_item name: (type_identifier) @name type: (_) @body) @definition.type

(source_file (const_item name: (identifier) @name) @definition.constant)
(source_file (static_item name: (identifier) @name) @definition.constant)

(call_expression function: (identifier) @name (#not-match? @name "^(Ok|Err|Some)$")) @reference.call
(call_expression
  function: (field_expression value: (_) @call.receiver field: (field_identifier) @name)) @reference.call
(call_expression
  function: (scoped_identifier path: (_) @call.receiver name: (identifier) @name)) @reference.call
(call_expression
  function: (generic_function function: [
    (identifier) @name
    (field_expression value: (_) @call.receiver field: (field_identifier) @name)
    (scoped_identifier path: (_) @call.receiver name: (identifier) @name)])) @reference.call
(macro_invocation macro: (identifier) @name) @reference.call
(macro_invocation
  macro: (scoped_identifier path: (_) @call.receiver name: (identifier) @name)) @reference.call

(use_declaration argument: [(identifier) (scoped_identifier)] @name) @import
(use_declaration argument: (scoped_use_list path: (_) @name)) @import
(use_declaration argument: (use_as_clause path: (_) @name)) @import
(use_declaration argument: (use_wildcard (_) @name)) @import
(extern_crate_declaration name: (identifier) @name) @import
(mod_item name: (identifier) @name !body) @import

(try_expression) @fact.error
(return_expression (call_expression function: (identifier) @_err (#eq? @_err "Err"))) @fact.error
(match_arm
  pattern: (match_pattern (tuple_struct_pattern type: (identifier) @_err))
  (#eq? @_err "Err")) @fact.error
(let_condition pattern: (tuple_struct_pattern type: (identifier) @_err) (#eq? @_err "Err")) @fact.error
(macro_invocation macro: (identifier) @_m (#match? @_m "^(panic|unreachable|bail|ensure)$")) @fact.error
(macro_invocation
  macro: (scoped_identifier name: (identifier) @_m)
  (#match? @_m "^(panic|unreachable|bail|ensure)$")) @fact.error
(call_expression
  function: (field_expression field: (field_identifier) @_fn)
  (#match? @_fn "^(unwrap|expect|map_err)$")) @fact.error

(call_expression
  function: (scoped_identifier path: (_) @_env name: (identifier) @_fn)
  (#match? @_env "^(std::)?env$") (#match? @_fn "^var(_os)?$")) @fact.config
(macro_invocation macro: (identifier) @_m (#match? @_m "^(option_)?env$")) @fact.config
(field_expression value: (identifier) @_cfg
  (#match? @_cfg "^(cfg|conf|config|settings|opts)$")) @fact.config
(field_expression value: (field_expression field: (field_identifier) @_cfg)
  (#match? @_cfg "^(cfg|conf|config|settings)$")) @fact.config
