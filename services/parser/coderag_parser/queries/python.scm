; Capture names are the contract (see coderag_parser/units.py):
;   @definition.<kind>  the whole definition; kind is function, method, class, interface or type
;   @name               its identifier        @body   its body (the signature is what precedes it)
;   @doc                its docstring         @receiver  a Go-style receiver
;   @reference.call     a call site, with @name the called identifier
(class_definition
  name: (identifier) @name
  body: (block . (expression_statement (string) @doc)?) @body) @definition.class

(function_definition
  name: (identifier) @name
  body: (block . (expression_statement (string) @doc)?) @body) @definition.function

(call
  function: [(identifier) @name (attribute attribute: (identifier) @name)]) @reference.call
