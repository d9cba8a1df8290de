"""The error bound `ptodsl check` applies to each example, next to the rule it replaced.

    ptodsl bench bounds [EXAMPLE ...]

Old rule (before issue 11): atol + rtol * max(|ref|, mean |ref|) per element, so one large
element loosened every small one. New rule: atol + rtol * scale, the computation's own
error scale at each element (`ptodsl.checking.error_bounds`). For each output: the kernel's max abs
error, both bounds at the element where the kernel comes closest to the new bound, the new
bound's range, and the verdict. Examples run at CI's sizes (tests/conftest.py: CI_DIMS).
"""

from __future__ import annotations

import sys

import torch

import ptodsl
from benchmarks import CI_DIMS, EXAMPLES, example_names
from ptodsl.checking.check import run_check, spec_case
from ptodsl.checking.draws import seeded_draw
from ptodsl.ir import nodes as ir
from ptodsl.runtime.simulator import SimulationError
from ptodsl.tools.tables import markdown_table

# The rule of before: per dtype (atol, rtol) on max(|ref|, mean |ref|).
OLD_TOLERANCES = {
    ir.DType.F32: (1e-5, 1e-4),
    ir.DType.F16: (1e-3, 4e-3),
    ir.DType.BF16: (8e-3, 1.6e-2),
}
HEADER = (
    "example",
    "output",
    "max abs err",
    "old bound there",
    "new bound there",
    "new bounds (min .. max)",
    "err / new bound",
    "verdict",
)


def rows_of(spec) -> list[tuple[str, ...]]:
    dims = CI_DIMS.get(spec.stem)
    compiled = ptodsl.compile(spec.read_text(encoding="utf-8"), name=spec.name, dims=dims)
    case = spec_case(compiled, seeded_draw(0))
    try:
        report = run_check(compiled)
    except SimulationError as error:
        return [(spec.stem, "", "", "", "", "", "", "ERROR: " + str(error).splitlines()[0])]
    rows = []
    outputs = compiled.lowered.checked.outputs
    for output, check, expected in zip(outputs, report.outputs, case.expected, strict=False):
        atol, rtol = OLD_TOLERANCES[output.type.dtype]
        old = atol + rtol * expected.abs().clamp_min(float(expected.abs().mean()))
        worst = check.worst[0] if check.worst else None
        at = worst.index if worst else ()
        old_there = float(old[at]) if worst else float("nan")
        verdict = (
            "PASS"
            if report.ok
            else "FAIL: "
            + (check.problem or "; ".join(report.problems) or f"{check.mismatched} off")
        )
        rows.append(
            (
                spec.stem,
                output.name,
                f"{check.max_abs_error:.3g}",
                f"{old_there:.3g}",
                f"{worst.bound:.3g}" if worst else "",
                f"{check.bound_range[0]:.3g} .. {check.bound_range[1]:.3g}",
                f"{check.worst_ratio:.3g}",
                verdict[:120],
            )
        )
    return rows


def main(argv: list[str]) -> int:
    names = example_names("bounds", __doc__, argv, "every example")
    torch.set_num_threads(1)
    chosen = [p for p in EXAMPLES if not names or p.stem in names]
    rows = []
    for spec in chosen:
        for row in rows_of(spec):
            rows.append(row)
            print(" | ".join(row), flush=True)
    print()
    print(markdown_table(HEADER, rows), end="")
    return 0 if all(row[-1] == "PASS" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
