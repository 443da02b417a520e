"""The OpenAI-compatible face of coderag: ``GET /v1/models`` and ``POST /v1/chat/completions``,
so chat front ends and editor assistants that take "a base URL and a key" ask the code base."""
