"""Parser service: repositories, files and tree-sitter units."""
