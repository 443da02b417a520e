; Capture names: see python.scm. Also used for .h files. A function's declarator may sit under one
; or two pointer_declarators (`char **f(void)`); @returns is the declared type without the `*`s.
(function_definition
  type: (_)? @returns
  declarator: [
    (function_declarator declarator: (identifier) @name parameters: (parameter_list) @params)
    (pointer_declarator
      declarator: (function_declarator
        declarator: (identifier) @name parameters: (parameter_list) @params))
    (pointer_declarator
      declarator: (pointer_declarator
        declarator: (function_declarator
          declarator: (identifier) @name parameters: (parameter_list) @params)))]
  body: (compound_statement) @body) @definition.function

; A name a macro builds (`PREFIX(scanLt)(const ENCODING *enc, ...)`, `NS(XmlInitEncoding)(...)`:
; a tokenizer compiled once per encoding): the function a reader names is the macro's argument.
(function_definition
  type: (_)? @returns
  declarator: (function_declarator
    declarator: (function_declarator
      declarator: (identifier)
      parameters: (parameter_list . (parameter_declaration type: (type_identifier) @name) .))
    parameters: (parameter_list) @params)
  body: (compound_statement) @body) @definition.function

(struct_specifier name: (type_identifier) @name body: (field_declaration_list) @body) @definition.type
(union_specifier name: (type_identifier) @name body: (field_declaration_list) @body) @definition.type
(enum_specifier name: (type_identifier) @name body: (enumerator_list) @body) @definition.type

; No @body: the signature is the whole typedef (up to 300 characters), so it keeps the alias name.
(type_definition
  declarator: [
    (type_identifier) @name
    (pointer_declarator declarator: (type_identifier) @name)
    (array_declarator declarator: (type_identifier) @name)
    (function_declarator
      declarator: (parenthesized_declarator (pointer_declarator declarator: (type_identifier) @name)))
  ]) @definition.type

(preproc_def name: (identifier) @name @definition.constant (#not-match? @name "_H_*$"))
(enumerator name: (identifier) @name) @definition.constant
(translation_unit
  (declaration
    declarator: [
      (identifier) @name
      (pointer_declarator declarator: (identifier) @name)
      (array_declarator declarator: (identifier) @name)
      (pointer_declarator declarator: (array_declarator declarator: (identifier) @name))
      (init_declarator declarator: [
        (identifier) @name
        (pointer_declarator declarator: (identifier) @name)
        (array_declarator declarator: (identifier) @name)
        (pointer_declarator declarator: (array_declarator declarator: (identifier) @name))])
    ]) @definition.variable)

(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (field_expression argument: (_) @call.receiver field: (field_identifier) @name)) @reference.call

(preproc_include path: (_) @name) @import

(goto_statement label: (statement_identifier) @_label
  (#match? @_label "^(err|fail|bad|bail|abort|out|cleanup|unwind|undo)")) @fact.error
(if_statement
  consequence: [
    (return_statement [(null) (number_literal) (unary_expression)] @_ret)
    (compound_statement (return_statement [(null) (number_literal) (unary_expression)] @_ret))]
  (#match? @_ret "^(NULL|nullptr|-)")) @fact.error
(call_expression function: (identifier) @_fn
  (#match? @_fn "^(perror|abort|assert|strerror|err|errx)$")) @fact.error
(call_expression function: (identifier) @_fn arguments: (argument_list . (_) @_code)
  (#match? @_fn "^_?exit$") (#not-match? @_code "^(0|EXIT_SUCCESS)$")) @fact.error

(call_expression function: (identifier) @_fn (#match? @_fn "^(secure_)?getenv$")) @fact.config
(field_expression argument: (identifier) @_cfg
  (#match? @_cfg "^(cfg|conf|config|settings|opts)$")) @fact.config
(field_expression argument: (field_expression field: (field_identifier) @_cfg)
  (#match? @_cfg "^(cfg|conf|config|settings)$")) @fact.config
