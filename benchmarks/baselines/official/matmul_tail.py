"""Official-pattern baseline for `matmul_tail` (examples/matmul_tail.pto, A @ B with
M = 1000, K = 512, N = 384): square_matmul's kernel after pypto r0.2.0's matmul example,
cube tiles [32, 32], [64, 64], [64, 64], one pypto.matmul, no loop (so no tail block)."""

from benchmarks.baselines.official.square_matmul import ModelNew

__all__ = ["ModelNew"]
