"""Benchmarks: run with `python -m benchmarks.<name>`; each prints a table."""
