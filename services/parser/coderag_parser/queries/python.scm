; Capture names are the contract (coderag_parser/units.py and facts.py read them; never per-language code):
;   @definition.<kind>  a definition; function, method, class, interface, type become units,
;                       constant and variable only enter the symbol table
;   @name  its identifier   @body  its body (the signature is what precedes it)
;   @doc  docstring   @receiver  Go-style receiver   @params  parameters   @returns  return type
;   @reference.call     a call site: @name the callee, @call.receiver the object it is called on
;   @import             an import: @name the module
;   @fact.error  @fact.context  @fact.config   error handling, context use, configuration reads
(class_definition
  name: (identifier) @name
  body: (block . (expression_statement (string) @doc)?) @body) @definition.class

(function_definition
  name: (identifier) @name
  parameters: (parameters) @params
  return_type: (_)? @returns
  body: (block . (expression_statement (string) @doc)?) @body) @definition.function

(module (expression_statement
  (assignment left: (identifier) @name) @definition.constant)
  (#match? @name "^[A-Z][A-Z0-9_]*$"))

(module (expression_statement
  (assignment left: (identifier) @name) @definition.variable)
  (#match? @name "^[a-z_][A-Za-z0-9_]*$"))

(call function: (identifier) @name) @reference.call
(call function: (attribute object: (_) @call.receiver attribute: (identifier) @name)) @reference.call

(import_statement name: (dotted_name) @name) @import
(import_statement name: (aliased_import name: (dotted_name) @name)) @import
(import_from_statement module_name: (_) @name) @import

(raise_statement) @fact.error
(except_clause) @fact.error

(call function: (attribute object: (identifier) @_os attribute: (identifier) @_fn)
  (#eq? @_os "os") (#eq? @_fn "getenv")) @fact.config
(attribute object: (identifier) @_os attribute: (identifier) @_env
  (#eq? @_os "os") (#eq? @_env "environ")) @fact.config
(attribute object: (identifier) @_cfg
  (#match? @_cfg "^(cfg|conf|config|settings|SETTINGS|CONFIG)$")) @fact.config
(attribute object: (attribute attribute: (identifier) @_cfg)
  (#match? @_cfg "^(cfg|conf|config|settings)$")) @fact.config

(attribute object: (identifier) @_ctx (#match? @_ctx "^(ctx|context)$")) @fact.context
