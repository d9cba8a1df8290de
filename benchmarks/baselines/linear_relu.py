"""Baseline `linear_relu`: relu(x @ W.T + b), x [M, K], W [N, K], b [N]. Pattern B: loop along
M with TARGET_LOOP_COUNT = 32 (BASIC_BATCH = 16 rows for M = 512); each chunk does the matmul
(b_trans=True), then the vec tile is set again for bias add + relu on the [16, N] chunk,
using the rule book's 2-D elementwise tile (8, 4096). Cube tiles as in the rule book, without
its two flags (pypto 0.2.0's set_cube_tile_shapes takes (m, k, n, enable_split_k))."""

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


def _linear_relu(x_rows, W, b):
    pypto.set_cube_tile_shapes([128, 128], [32, 128], [256, 256])
    h = pypto.matmul(x_rows, W, pypto.DT_FP32, b_trans=True)
    pypto.set_vec_tile_shapes(8, 4096)
    return pypto.relu(h + b)


@functools.cache
def make_linear_relu_kernel(m, k, n):
    # (8, 4096) stays within 16384 elements as long as n <= 2048.
    assert min(8, m) * min(4096, n) <= 16384
    BASIC_BATCH = ceil_div(m, TARGET_LOOP_COUNT)
    num_iters = m // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = m - rest

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def linear_relu_kernel(
        x: pypto.Tensor((m, k), pypto.DT_FP32),
        W: pypto.Tensor((n, k), pypto.DT_FP32),
        b: pypto.Tensor((1, n), pypto.DT_FP32),
        y: pypto.Tensor((m, n), pypto.DT_FP32),
    ):
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            x_chunk = pypto.view(x, [BASIC_BATCH, k], [off, 0])
            pypto.assemble(_linear_relu(x_chunk, W, b), [off, 0], y)
        if tail > 0:
            x_tail = pypto.view(x, [tail, k], [rest, 0])
            pypto.assemble(_linear_relu(x_tail, W, b), [rest, 0], y)

    return linear_relu_kernel


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, W, b):
        assert x.dim() == 2 and W.dim() == 2 and x.dtype == torch.float32
        m, k = x.shape
        n = W.shape[0]
        assert W.shape == (n, k) and b.shape == (n,)
        kernel = make_linear_relu_kernel(m, k, n)
        y = torch.empty((m, n), dtype=torch.float32, device=x.device)
        kernel(x.contiguous(), W.contiguous(), b.contiguous().reshape(1, n), y)
        return y
