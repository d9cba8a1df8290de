"""Fusion pays: each KernelBench level-2 spec's fused program against the same computation
as one kernel per torch op (`Tuning(kernels="per_op")`: every value between ops written to
memory and read back), both in pypto's cost model (SIM, no verification).

    ptodsl bench fusion [EXAMPLE ...]

Prints one row per example: the kernels of each program, their simulated times (the sum
over every launch) and the ratio unfused / fused. Without arguments it runs the level-2
examples listed in DEFAULT, at full shape.
"""

from __future__ import annotations

import sys

import ptodsl
from benchmarks import EXAMPLES, add_row, example_names, print_table
from ptodsl.ir import nodes as ir
from ptodsl.runtime.simulator import SimulationError
from ptodsl.tools.tuning import probe_cost

EXAMPLE_BY_STEM = {path.stem: path for path in EXAMPLES}
# GEMM layers with two to six ops after the product: at full shape, the cost model runs
# each program in a minute or two.
DEFAULT = [
    "12_Gemm_Multiply_LeakyReLU",
    "29_Matmul_Mish_Mish",
    "53_Gemm_Scaling_Hardtanh_GELU",
    "59_Matmul_Swish_Scaling",
    "63_Gemm_ReLU_Divide",
    "76_Gemm_Add_ReLU",
    "81_Gemm_Swish_Divide_Clamp_Tanh_Clamp",
    "86_Matmul_Divide_GELU",
    "95_Matmul_Add_Swish_Tanh_GELU_Hardtanh",
    "99_Matmul_GELU_Softmax",
]


def main(argv: list[str]) -> int:
    names = example_names("fusion", __doc__, argv, "the list DEFAULT") or DEFAULT
    header = ("example", "fused kernels", "fused us", "per-op kernels", "per-op us", "ratio")
    rows = [header]
    failed = 0
    for name in names:
        text = EXAMPLE_BY_STEM[name].read_text(encoding="utf-8")
        fused = ptodsl.compile(text, name=f"{name}.pto", tuning=None)
        unfused = ptodsl.compile(text, name=f"{name}.pto", tuning=ir.Tuning(kernels="per_op"))
        try:
            fused_us = probe_cost(fused.lowered).sim_time_us
            unfused_us = probe_cost(unfused.lowered).sim_time_us
        except SimulationError as error:
            failed += 1
            add_row(rows, (name, "ERROR: " + str(error).splitlines()[0][:90], "", "", "", ""))
            continue
        add_row(
            rows,
            (
                name,
                str(len(fused.program.calls)),
                f"{fused_us:.2f}",
                str(len(unfused.program.calls)),
                f"{unfused_us:.2f}",
                f"{unfused_us / fused_us:.2f}",
            ),
        )
    return print_table(rows, failed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
