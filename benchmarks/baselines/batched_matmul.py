"""Baseline `batched_matmul`: torch.bmm(A, B) for [B, M, K] @ [B, K, N] (KernelBench #3).
Pattern B, 3-D batched matmul: one call, no loop. Cube tiles as in the rule book, without its
two flags (pypto 0.2.0's set_cube_tile_shapes takes (m, k, n, enable_split_k))."""

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
def make_batched_matmul_kernel(b, m, k, n):
    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def batched_matmul_kernel(
        A: pypto.Tensor((b, m, k), pypto.DT_FP32),
        Bm: pypto.Tensor((b, k, n), pypto.DT_FP32),
        C: pypto.Tensor((b, m, n), pypto.DT_FP32),
    ):
        pypto.set_cube_tile_shapes([128, 128], [32, 128], [256, 256])
        C[:] = pypto.matmul(A, Bm, pypto.DT_FP32)

    return batched_matmul_kernel


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, Bm):
        assert A.dim() == 3 and Bm.dim() == 3 and A.dtype == torch.float32
        b, m, k = A.shape
        n = Bm.shape[2]
        assert Bm.shape == (b, k, n)
        kernel = make_batched_matmul_kernel(b, m, k, n)
        C = torch.empty((b, m, n), dtype=torch.float32, device=A.device)
        kernel(A.contiguous(), Bm.contiguous(), C)
        return C
