; Capture names: see python.scm.
(function_declaration
  name: (identifier) @name
  parameters: (parameter_list) @params
  result: (_)? @returns
  body: (block) @body) @definition.function

(method_declaration
  receiver: (parameter_list) @receiver
  name: (field_identifier) @name
  parameters: (parameter_list) @params
  result: (_)? @returns
  body: (block) @body) @definition.method

; The definition is the type_spec: a lone `type X ...` takes its `type` keyword and doc comment
; along (type_declaration is a wrapper), each spec of a `type ( ... )` group stands alone.
(type_declaration
  (type_spec
    name: (type_identifier) @name
    type: (interface_type) @body) @definition.interface)

(type_declaration
  (type_spec
    name: (type_identifier) @name
    type: [(struct_type) (type_identifier) (qualified_type) (function_type) (map_type)
           (slice_type) (pointer_type) (channel_type) (array_type) (generic_type)] @body) @definition.type)
(type_declaration
  (type_alias name: (type_identifier) @name type: (_) @body) @definition.type)

; a const or var declaration (a parenthesised group is one unit, named by its first name)
(source_file (const_declaration (const_spec name: (identifier) @name)) @definition.constant)
(source_file (var_declaration [(var_spec name: (identifier) @name)
                               (var_spec_list (var_spec name: (identifier) @name))]) @definition.variable)

(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (selector_expression operand: (_) @call.receiver field: (field_identifier) @name)) @reference.call

(import_spec path: (interpreted_string_literal) @name) @import

(if_statement
  condition: (binary_expression left: (identifier) @_err right: (nil))
  (#match? @_err "^err")) @fact.error
(call_expression
  function: (selector_expression operand: (identifier) @_log field: (field_identifier) @_fatal)
  (#match? @_log "^(log|logger|klog)$") (#match? @_fatal "^(Fatal|Panic)")) @fact.error
(call_expression function: (identifier) @_fn (#match? @_fn "^(panic|recover)$")) @fact.error

(call_expression
  function: (selector_expression operand: (identifier) @_os field: (field_identifier) @_fn)
  (#eq? @_os "os") (#match? @_fn "^(Getenv|LookupEnv)$")) @fact.config
(selector_expression operand: (identifier) @_cfg
  (#match? @_cfg "^(cfg|conf|config|settings|opts)$")) @fact.config
(selector_expression operand: (selector_expression field: (field_identifier) @_cfg)
  (#match? @_cfg "^(cfg|conf|config|Config|settings)$")) @fact.config

(selector_expression operand: (identifier) @_ctx (#eq? @_ctx "ctx")) @fact.context
(call_expression function: (selector_expression operand: (identifier) @_pkg field: (field_identifier) @_fn)
  (#eq? @_pkg "context") (#match? @_fn "^With")) @fact.context
