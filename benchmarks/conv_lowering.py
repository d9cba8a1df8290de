"""How a convolution can run in pypto 0.2.0's SIM mode, measured (issue 18).

    ptodsl bench conv_lowering

Two candidate lowerings of `torch.nn.functional.conv2d` (stride 1, no padding, no bias), each
a hand-written PyPTO module run by ptodsl's simulator worker with pypto's graph verification
(which computes the outputs), compared with torch in float64:

- `pypto.conv`, PyPTO's own convolution, with conv tiles that pass its checks;
- an implicit GEMM: per block of output rows and per kernel tap, a `[C_out, C_in]` slice of
  the weight (the weight seen as `[C_out·C_in, kH·kW]`, transposed once in the kernel, so
  that each tap is one aligned row) times the input's view at that tap, reshaped to
  `[C_in, rows·W_out]`; the taps' products are summed and the block assembled into y.

Prints one row per case: the simulated time, the largest error and the error relative to
the largest `|x| * |w|` (the magnitude convolution the check bounds errors with), or why
the lowering failed.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import torch

from ptodsl.runtime.simulator import SimulationError, prepare_kernel
from ptodsl.tools.tables import markdown_table

# (batch, C_in, H, W, C_out, kernel size, output rows per block)
CASES = [
    (1, 16, 6, 18, 16, 3, 1),
    (1, 16, 6, 18, 16, 3, 4),
    (1, 16, 34, 34, 32, 3, 8),
    (1, 3, 34, 34, 64, 3, 8),
    (2, 16, 34, 34, 32, 3, 4),
]

_HEADER = """import functools

import pypto
from pypto import pypto_impl


@functools.cache
def make_conv():
"""


def pypto_conv_module(n: int, c: int, h: int, w: int, co: int, k: int, rows: int) -> str:
    """pypto.conv with conv tiles that pass its shape checks (tileWout 16-aligned, tileHout
    1 unless W_out is a multiple of 16, tileWin at most 16); extend_params={} because None
    is a TypeError in 0.2.0's binding."""
    del rows  # pypto.conv tiles the output itself
    ho, wo = h - k + 1, w - k + 1
    return (
        _HEADER
        + f"""    l1 = pypto_impl.TileL1Info({k}, 1, 16, 16, {c}, {c}, {co}, 1)
    l0 = pypto_impl.TileL0Info(1, 16, 16, 16)

    @pypto.frontend.jit(runtime_options={{"run_mode": pypto.RunMode.SIM}})
    def kernel(
        x: pypto.Tensor(({n}, {c}, {h}, {w}), pypto.DT_FP32),
        weight: pypto.Tensor(({co}, {c}, {k}, {k}), pypto.DT_FP32),
        y: pypto.Tensor(({n}, {co}, {ho}, {wo}), pypto.DT_FP32),
    ):
        pypto.set_conv_tile_shapes(l1, l0)
        y[:] = pypto.conv(
            x, weight, pypto.DT_FP32, [1, 1], [0, 0, 0, 0], [1, 1], extend_params={{}}
        )

    return kernel
"""
    )


def implicit_gemm_module(n: int, c: int, h: int, w: int, co: int, k: int, rows: int) -> str:
    ho, wo = h - k + 1, w - k + 1
    assert ho % rows == 0, "whole blocks of output rows"
    taps = [(kh, kw) for kh in range(k) for kw in range(k)]
    lines = [
        '    @pypto.frontend.jit(runtime_options={"run_mode": pypto.RunMode.SIM})',
        "    def kernel(",
        f"        x: pypto.Tensor(({n}, {c}, {h}, {w}), pypto.DT_FP32),",
        f"        weight: pypto.Tensor(({co * c}, {k * k}), pypto.DT_FP32),",
        f"        y: pypto.Tensor(({n}, {co}, {ho}, {wo}), pypto.DT_FP32),",
        "    ):",
        "        pypto.set_cube_tile_shapes([64, 64], [64, 64], [64, 64])",
        f"        pypto.set_vec_tile_shapes({co * c}, {k * k})",
        "        by_tap = pypto.transpose(weight, 0, 1)",
        f"        pypto.set_vec_tile_shapes(1, {co * c})",
    ]
    for t, (kh, kw) in enumerate(taps):
        lines.append(
            f"        w{kh}{kw} = pypto.reshape(pypto.view(by_tap, [1, {co * c}], [{t}, 0]), "
            f"[{co}, {c}])"
        )
    lines += [
        f"        for b in pypto.loop(0, {n}, 1, name='batch', idx_name='b'):",
        f"            for r in pypto.loop(0, {ho // rows}, 1, name='rows', idx_name='r'):",
        f"                pypto.set_vec_tile_shapes(1, {c}, {rows}, {wo})",
    ]
    for kh, kw in taps:
        lines.append(
            f"                x{kh}{kw} = pypto.reshape(pypto.view(x, [1, {c}, {rows}, {wo}], "
            f"[b, 0, r * {rows} + {kh}, {kw}]), [{c}, {rows * wo}])"
        )
        lines.append(
            f"                p{kh}{kw} = pypto.matmul(w{kh}{kw}, x{kh}{kw}, pypto.DT_FP32)"
        )
    lines += [
        f"                pypto.set_vec_tile_shapes({co}, {rows * wo})",
        "                total = " + " + ".join(f"p{kh}{kw}" for kh, kw in taps),
        f"                pypto.set_vec_tile_shapes(1, {co}, {rows}, {wo})",
        f"                block = pypto.reshape(total, [1, {co}, {rows}, {wo}])",
        f"                pypto.assemble(block, [b, 0, r * {rows}, 0], y)",
        "",
        "    return kernel",
        "",
    ]
    return _HEADER + "\n".join(lines)


def _reason(error: SimulationError) -> str:
    """The line of pypto's report that says what failed."""
    text = str(error)
    if "ExecuteOperation error: op CONV" in text:
        return "pypto's calculator cannot execute CONV (ExecuteOperation error)"
    found = re.findall(r"Err[Cc]ode: ?\w+!?,? ?([^,\n]+)", text)
    return (found[-1] if found else text.splitlines()[0])[:100]


def measure(write_module, case: tuple[int, ...], folder: Path) -> list[str]:
    n, c, h, w, co, k, rows = case
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, c, h, w, generator=generator)
    weight = torch.randn(co, c, k, k, generator=generator)
    expected = torch.nn.functional.conv2d(x.double(), weight.double())
    magnitude = torch.nn.functional.conv2d(x.double().abs(), weight.double().abs()).max().item()
    module = folder / f"{write_module.__name__}.py"
    module.write_text(write_module(*case), encoding="utf-8")
    if write_module is implicit_gemm_module:
        weight = weight.reshape(co * c, k * k)  # the same elements: no copy
    y = torch.zeros(expected.shape)
    start = time.monotonic()
    try:
        run = prepare_kernel(module, "make_conv", [], [x, weight, y], 1).run()
    except SimulationError as error:
        try:  # the cost model alone, without the calculator
            prepare_kernel(module, "make_conv", [], [x, weight, y], 1, verify="none").run()
            cost_model = "the cost model runs it"
        except SimulationError as cost_error:
            cost_model = f"cost model: {_reason(cost_error)}"
        return [
            write_module.__name__,
            str(case),
            "fails",
            "",
            "",
            f"{_reason(error)}; {cost_model}",
        ]
    error_max = (run.outputs[0].double() - expected).abs().max().item()
    return [
        write_module.__name__,
        str(case),
        f"{run.sim_time_us:.2f}",
        f"{error_max:.3g}",
        f"{error_max / magnitude:.2g}",
        f"wall {time.monotonic() - start:.1f} s",
    ]


def main(argv: list[str]) -> None:
    argparse.ArgumentParser(prog="ptodsl bench conv_lowering", description=__doc__).parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ptodsl-conv-") as folder:
        for case in CASES:
            for write_module in (pypto_conv_module, implicit_gemm_module):
                rows.append(measure(write_module, case, Path(folder)))
    header = ["lowering", "(N, C_in, H, W, C_out, k, rows)", "sim us", "max err", "rel", "note"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main(sys.argv[1:])
