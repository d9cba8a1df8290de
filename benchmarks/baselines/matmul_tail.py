"""Baseline `matmul_tail`: A @ B with M = 1000. Pattern B, the same kernel as square_matmul:
loop along M with TARGET_LOOP_COUNT = 32: BASIC_BATCH = ceil(1000 / 32) = 32 rows,
31 iterations and a constant 8-row tail (view sizes must be compile-time constants)."""

from benchmarks.baselines.square_matmul import ModelNew

__all__ = ["ModelNew"]
