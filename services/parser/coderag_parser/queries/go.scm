; Capture names: see python.scm.
(function_declaration
  name: (identifier) @name
  body: (block) @body) @definition.function

(method_declaration
  receiver: (parameter_list) @receiver
  name: (field_identifier) @name
  body: (block) @body) @definition.method

(type_declaration
  (type_spec
    name: (type_identifier) @name
    type: (_) @body)) @definition.type

(call_expression
  function: [(identifier) @name (selector_expression field: (field_identifier) @name)]) @reference.call
