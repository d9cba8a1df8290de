"""Checking: the draws, the error bounds, KernelBench problems run in workers, and
coverage."""
