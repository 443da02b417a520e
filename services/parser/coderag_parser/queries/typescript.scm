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
  name: [(property_identifier) (private_property_identifier)] @name
  body: (statement_block) @body) @definition.method

(function_declaration
  name: (identifier) @name
  body: (statement_block) @body) @definition.function

(generator_function_declaration
  name: (identifier) @name
  body: (statement_block) @body) @definition.function

(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function body: (_) @body) (function_expression body: (_) @body)])) @definition.function

(call_expression
  function: [(identifier) @name (member_expression property: (property_identifier) @name)]) @reference.call
