"""Baseline `square_matmul`: A @ B for square [N, N] matrices (KernelBench #1). Pattern B:
loop along M with TARGET_LOOP_COUNT = 32 (BASIC_BATCH = ceil(M / 32) rows), view -> matmul ->
assemble."""

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


@functools.cache
def make_square_matmul_kernel(m, k, n):
    BASIC_BATCH = ceil_div(m, TARGET_LOOP_COUNT)
    num_iters = m // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = m - rest

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def square_matmul_kernel(
        A: pypto.Tensor((m, k), pypto.DT_FP32),
        B: pypto.Tensor((k, n), pypto.DT_FP32),
        C: pypto.Tensor((m, n), pypto.DT_FP32),
    ):
        # Rule book cube tiles:
        # set_cube_tile_shapes([128, 128], [32, 128], [256, 256], True, False).
        # Adjustment: pypto 0.2.0's signature is (m, k, n, enable_split_k=False) and rejects a
        # fifth argument; the two flags are dropped (no split-K, as the rule book's last flag says).
        pypto.set_cube_tile_shapes([128, 128], [32, 128], [256, 256])
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            a_chunk = pypto.view(A, [BASIC_BATCH, k], [off, 0])
            c_chunk = pypto.matmul(a_chunk, B, pypto.DT_FP32, b_trans=False)
            pypto.assemble(c_chunk, [off, 0], C)
        if tail > 0:
            a_tail = pypto.view(A, [tail, k], [rest, 0])
            c_tail = pypto.matmul(a_tail, B, pypto.DT_FP32, b_trans=False)
            pypto.assemble(c_tail, [rest, 0], C)

    return square_matmul_kernel


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        assert A.dim() == 2 and B.dim() == 2 and A.dtype == torch.float32
        m, k = A.shape
        n = B.shape[1]
        assert B.shape == (k, n)
        kernel = make_square_matmul_kernel(m, k, n)
        C = torch.empty((m, n), dtype=torch.float32, device=A.device)
        kernel(A.contiguous(), B.contiguous(), C)
        return C
