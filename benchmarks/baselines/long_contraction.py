"""Baseline `long_contraction`: A @ B with K = 70000. Pattern B: loop along M with
TARGET_LOOP_COUNT = 32 (M = 16: 16 iterations of one row). Adjustment: pypto 0.2.0 fails on
contractions with K > 65535, so each row block sums ceil(K / 65535) = 2 matmuls over
K-chunks of 35000 (unrolled inside the iteration, no nested loop). Cube tiles as in the rule
book, without its two flags (0.2.0's set_cube_tile_shapes takes (m, k, n, enable_split_k))."""

import functools
import importlib.util
import os

import pypto
import torch

TARGET_LOOP_COUNT = 32  # rule book: loop count whenever a loop is used
MAX_TILES = 2048  # rule book: auto_tiles = prod(ceil(shape / tile)) must stay <= 2048
# Test hook only: verify.py lowers the limit to run the loop branches at small shapes.
MAX_TILES = int(os.getenv("BASELINE_MAX_TILES", MAX_TILES))


def ceil_div(a, b):
    return (a + b - 1) // b


def _run_mode():
    # AIKG_PYPTO_RUN_MODE: 0 = NPU, 1 = SIM; unset: NPU when torch_npu is installed, else SIM.
    mode = os.getenv("AIKG_PYPTO_RUN_MODE")
    if mode is None:
        has_npu = importlib.util.find_spec("torch_npu") is not None
        return pypto.RunMode.NPU if has_npu else pypto.RunMode.SIM
    return pypto.RunMode.NPU if int(mode) == 0 else pypto.RunMode.SIM


MAX_K = 65535


def _rows_times_b(a_rows, B, rows, k, k_chunk, n):
    pypto.set_cube_tile_shapes([128, 128], [32, 128], [256, 256])
    acc = None
    for start in range(0, k, k_chunk):  # plain range: unrolled at trace time
        size = min(k_chunk, k - start)
        a_part = pypto.view(a_rows, [rows, size], [0, start])
        b_part = pypto.view(B, [size, n], [start, 0])
        part = pypto.matmul(a_part, b_part, pypto.DT_FP32)
        if acc is None:
            acc = part
        else:
            pypto.set_vec_tile_shapes(8, 4096)
            acc = acc + part
    return acc


@functools.cache
def make_long_contraction_kernel(m, k, n):
    k_chunk = ceil_div(k, ceil_div(k, MAX_K))
    BASIC_BATCH = ceil_div(m, TARGET_LOOP_COUNT)
    num_iters = m // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = m - rest

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def long_contraction_kernel(
        A: pypto.Tensor((m, k), pypto.DT_FP32),
        B: pypto.Tensor((k, n), pypto.DT_FP32),
        C: pypto.Tensor((m, n), pypto.DT_FP32),
    ):
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            a_rows = pypto.view(A, [BASIC_BATCH, k], [off, 0])
            pypto.assemble(_rows_times_b(a_rows, B, BASIC_BATCH, k, k_chunk, n), [off, 0], C)
        if tail > 0:
            a_tail = pypto.view(A, [tail, k], [rest, 0])
            pypto.assemble(_rows_times_b(a_tail, B, tail, k, k_chunk, n), [rest, 0], C)

    return long_contraction_kernel


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        assert A.dim() == 2 and B.dim() == 2 and A.dtype == torch.float32
        m, k = A.shape
        n = B.shape[1]
        assert B.shape == (k, n)
        kernel = make_long_contraction_kernel(m, k, n)
        C = torch.empty((m, n), dtype=torch.float32, device=A.device)
        kernel(A.contiguous(), B.contiguous(), C)
        return C
