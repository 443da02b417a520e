"""coderag's shared library: settings, wire schemas, errors, stores, the job queue, the CLI."""
