"""Baselines that follow the tiling and loop choices of pypto's own example kernels
(hicann/pypto, tag r0.2.0, `examples/`), written for ptodsl's examples' shapes and specs.

One module per example, `official/<kernel>.py` (named after the spec's `kernel`, like
benchmarks/baselines/), its docstring naming the official kernel it follows and what was
adapted; further variants of one example are `official/<kernel>__<variant>.py`.

Which official kernel (under r0.2.0's examples/) each module follows, and its tiling:

- softmax: 02_intermediate/operators/softmax; [B, 1, 1, D], vec (1, 4, 1, 64), loop over B
  one index per iteration, view / assemble.
- layer_norm: 02_intermediate/basic_nn/layer_normalization (LayerNorm); (N, C*H*W), vec
  (64, 128), one pass.
- rms_norm: the same file (RMSNorm); [N, C, H*W], vec (1, 64, 128), one pass.
- bias_gelu: 02_intermediate/operators/activation (GELU); vec (32, 32), one pass.
- sigmoid: the same file (SiLU); vec (32, 32), one pass.
- bf16_gate, half_gate: the same file (SwiGLU); vec (32, 32), one pass.
- square_matmul, matmul_tail: 01_beginner/compute/matmul_ops (basic); cube [32, 32],
  [64, 64], [64, 64], one matmul; matmul_transposed_b: its right-transposed case;
  batched_matmul: its batch case.
- linear_relu: 03_advanced/patterns/function (linear projection); cube [64, 64] x 3, one
  matmul, then vec (64, 128) for bias and relu.
- channel_affine: 01_beginner/transform/add_scalar_loop_view_assemble; vec (1, 4, 1, 64),
  loop over B one index per iteration, view / assemble.
- channel_affine__tile_1x2x4x128, channel_affine__tile_2x4x8x256: 01_beginner/tiling (the
  4-D add's two tilings); one pass.
- sum_dim, mean_dim, max_dim: 01_beginner/compute/reduce_ops (sum, amax); vec (8, 8, 8),
  one pass.
"""

from pathlib import Path

HERE = Path(__file__).resolve().parent

# Dims at which benchmarks.run compares an official baseline that cannot run at an example's
# full shape and has no CI dims (tests/conftest.py) to fall back on: the official matmul
# example's single pypto.matmul with [32, 64]-sized tiles has too many tiles there.
REDUCED_DIMS = {
    "square_matmul": {"N": 512},
    "matmul_transposed_b": {"M": 256, "K": 1024, "N": 512},
    "batched_matmul": {"batch": 8},
}


def variants(kernel: str) -> list[Path]:
    """The official-pattern modules for the example whose kernel is `kernel`, the main one
    (<kernel>.py) first."""
    found = [p for p in HERE.glob(f"{kernel}__*.py")]
    main = HERE / f"{kernel}.py"
    return ([main] if main.exists() else []) + sorted(found)


def example_kernel(module: Path) -> str:
    """The kernel name of the example an official module is for."""
    return module.stem.split("__")[0]
