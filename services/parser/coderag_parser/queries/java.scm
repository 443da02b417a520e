; Capture names: see python.scm.
(class_declaration
  name: (identifier) @name
  body: (class_body) @body) @definition.class

(interface_declaration
  name: (identifier) @name
  body: (interface_body) @body) @definition.interface

(enum_declaration
  name: (identifier) @name
  body: (enum_body) @body) @definition.class

(annotation_type_declaration
  name: (identifier) @name
  body: (annotation_type_body) @body) @definition.interface

(record_declaration
  name: (identifier) @name
  parameters: (formal_parameters)? @params
  body: (class_body) @body) @definition.class

; bodiless (interface and abstract) methods too: each is the definition a reader looks up
(method_declaration
  type: (_) @returns
  name: (identifier) @name
  parameters: (formal_parameters) @params
  body: (block)? @body) @definition.method

(constructor_declaration
  name: (identifier) @name
  parameters: (formal_parameters) @params
  body: (constructor_body) @body) @definition.method

; static final fields and interface fields are the constants
((field_declaration
  (modifiers) @_mods
  declarator: (variable_declarator name: (identifier) @name)) @definition.constant
  (#match? @_mods "\\bstatic\\b") (#match? @_mods "\\bfinal\\b"))
(constant_declaration declarator: (variable_declarator name: (identifier) @name)) @definition.constant
; other fields: documented ones between methods become units of their own
(field_declaration declarator: (variable_declarator name: (identifier) @name)) @definition.variable

(method_invocation
  object: (_)? @call.receiver
  name: (identifier) @name) @reference.call
(object_creation_expression
  type: [(type_identifier) @name (generic_type . (type_identifier) @name)]) @reference.call

(import_declaration [(identifier) (scoped_identifier)] @name) @import

(catch_clause) @fact.error
(throw_statement) @fact.error

(method_invocation
  object: (identifier) @_sys
  name: (identifier) @_fn
  (#eq? @_sys "System") (#match? @_fn "^(getenv|getProperty)$")) @fact.config
(annotation name: (identifier) @_ann (#match? @_ann "^(Value|ConfigurationProperties)$")) @fact.config
(method_invocation object: (identifier) @_cfg
  (#match? @_cfg "^(cfg|conf|config|settings|props|properties|env)$")) @fact.config
(method_invocation object: (field_access field: (identifier) @_cfg)
  (#match? @_cfg "^(cfg|conf|config|settings|props|properties|env)$")) @fact.config
(field_access object: (identifier) @_cfg
  (#match? @_cfg "^(cfg|conf|config|settings)$")) @fact.config
(field_access object: (field_access field: (identifier) @_cfg)
  (#match? @_cfg "^(cfg|conf|config|settings)$")) @fact.config

(method_invocation object: (identifier) @_ctx (#match? @_ctx "^(ctx|context)$")) @fact.context
(field_access object: (identifier) @_ctx (#match? @_ctx "^(ctx|context)$")) @fact.context
