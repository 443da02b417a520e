"""The benchmarks: run each as ``python -m bench.NAME`` from the repository root (docs/BENCHMARKS.md
says which produced each figure); they import the project as any client does."""
