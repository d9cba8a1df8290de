"""Baseline `math_functions`: every elementwise builtin of the spec on two [N] vectors,
1-D with vec tile 8192 (pattern A). Rewrites a hand author makes for pypto 0.2.0:
expm1(z) -> exp(z) - 1.0 (expm1 rejects 1-D tensors), e / x -> reciprocal(x) * e (scalar on
the left of `/`), x ** 0.5 -> sqrt(x), exp(z) ** 2 -> exp(z) * exp(z), clamp -> min/max.
Tile 8192 is larger than N = 4096 here; the rule book's constant is kept literally."""

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


def _compute(x, z, e):
    ez = pypto.exp(z)
    rx = pypto.reciprocal(x)
    y = (
        pypto.sqrt(x)
        + pypto.pow(x, e)
        + pypto.rsqrt(x)
        + pypto.log(x)
        + pypto.abs(z)
        + ez * ez
        - rx * e
    )
    w = (
        pypto.where(z >= x, z, 1.0)
        + pypto.where(z != 0.5, 2.0, z)
        + pypto.log1p(x)
        + (ez - 1.0)
        + pypto.relu(z)
        + rx
        + pypto.minimum(z, e)
        + pypto.maximum(z, e * -1.0)
        + pypto.minimum(z, 0.25)
        + pypto.maximum(z, -0.5)
    )
    return y, w


@functools.cache
def make_math_functions_kernel(size, e):
    TILE = 8192  # rule book: 1-D elementwise vec tile
    auto_tiles = ceil_div(size, TILE)
    if auto_tiles <= MAX_TILES:
        # Few enough tiles: one pass, no loop.
        @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
        def math_functions_kernel(
            x: pypto.Tensor((size,), pypto.DT_FP32),
            z: pypto.Tensor((size,), pypto.DT_FP32),
            y: pypto.Tensor((size,), pypto.DT_FP32),
            w: pypto.Tensor((size,), pypto.DT_FP32),
        ):
            pypto.set_vec_tile_shapes(TILE)
            y_val, w_val = _compute(x, z, e)
            y[:] = y_val
            w[:] = w_val

        return math_functions_kernel

    # Too many tiles: loop over TARGET_LOOP_COUNT chunks, plus a constant-size tail.
    BASIC_BATCH = ceil_div(size, TARGET_LOOP_COUNT)
    num_iters = size // BASIC_BATCH
    rest = num_iters * BASIC_BATCH
    tail = size - rest

    @pypto.frontend.jit(runtime_options={"run_mode": _run_mode()})
    def math_functions_loop_kernel(
        x: pypto.Tensor((size,), pypto.DT_FP32),
        z: pypto.Tensor((size,), pypto.DT_FP32),
        y: pypto.Tensor((size,), pypto.DT_FP32),
        w: pypto.Tensor((size,), pypto.DT_FP32),
    ):
        pypto.set_vec_tile_shapes(TILE)
        for bi in pypto.loop(0, num_iters, 1, name="LOOP", idx_name="bi"):
            off = bi * BASIC_BATCH
            x_c = pypto.view(x, [BASIC_BATCH], [off])
            z_c = pypto.view(z, [BASIC_BATCH], [off])
            y_c, w_c = _compute(x_c, z_c, e)
            pypto.assemble(y_c, [off], y)
            pypto.assemble(w_c, [off], w)
        if tail > 0:
            x_t = pypto.view(x, [tail], [rest])
            z_t = pypto.view(z, [tail], [rest])
            y_t, w_t = _compute(x_t, z_t, e)
            pypto.assemble(y_t, [rest], y)
            pypto.assemble(w_t, [rest], w)

    return math_functions_loop_kernel


class ModelNew(torch.nn.Module):
    def __init__(self, e: float = 3.0):
        super().__init__()
        self.e = float(e)

    def forward(self, x, z):
        assert x.dim() == 1 and x.dtype == torch.float32
        assert z.shape == x.shape and z.dtype == torch.float32
        size = x.numel()
        kernel = make_math_functions_kernel(size, self.e)
        y = torch.empty((size,), dtype=torch.float32, device=x.device)
        w = torch.empty((size,), dtype=torch.float32, device=x.device)
        kernel(x.contiguous().reshape(size), z.contiguous().reshape(size), y, w)
        return y.reshape(x.shape), w.reshape(x.shape)
