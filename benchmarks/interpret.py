"""What a call of a generated `ModelNew.forward` costs in interpreter mode, at full shape.

    ptodsl bench interpret [EXAMPLE ...]

Runs each example's KernelBench answer as a harness does (exec of its text, `ModelNew`,
forward on the spec's seeded inputs) in pypto's simulator, where ptodsl's interpreter
computes the outputs, and prints per example: whether the outputs are within `check`'s
bounds of the spec's float64 reference, the wall time of the call, and the peak memory of
the interpreter's workers so far (a running maximum: list the smaller examples first).
Without arguments: the six patterns of tests/test_interpret.py.
"""

from __future__ import annotations

import os
import resource
import sys
import time

import torch

import ptodsl
from benchmarks import EXAMPLES, INTERPRETER_PATTERNS, add_row, example_names, print_table
from ptodsl.checking.check import compare, spec_case
from ptodsl.checking.draws import seeded_draw
from ptodsl.emission.codegen import emit_kernelbench

EXAMPLE_BY_STEM = {path.stem: path for path in EXAMPLES}


def main(argv: list[str]) -> int:
    names = example_names("interpret", __doc__, argv, "the interpreter's examples")
    os.environ["AIKG_PYPTO_RUN_MODE"] = "1"
    os.environ.pop("PTODSL_SIM", None)
    rows = [("example", "outputs", "max abs err", "forward s", "peak worker GB so far")]
    failed = 0
    for name in names or INTERPRETER_PATTERNS:
        spec = EXAMPLE_BY_STEM[name]
        compiled = ptodsl.compile(spec.read_text(encoding="utf-8"), name=spec.name)
        case = spec_case(compiled, seeded_draw(0))
        checked = compiled.lowered.checked
        arguments, state = case.forward_and_state(checked)
        context: dict = {}
        exec(compile(emit_kernelbench(compiled.program, spec.name), "<string>", "exec"), context)
        model = context["ModelNew"](**case.init_kwargs)
        model.load_state_dict(state)
        started = time.monotonic()
        with torch.no_grad():
            result = model(*arguments)
        seconds = time.monotonic() - started
        results = result if isinstance(result, tuple) else (result,)
        judged = [
            compare(o.name, actual, expected, scale, o.type.dtype)
            for o, actual, expected, scale in zip(
                checked.outputs, results, case.expected, case.scales, strict=True
            )
        ]
        ok = all(j.ok for j in judged)
        failed += not ok
        peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
        error = max(j.max_abs_error for j in judged)
        add_row(
            rows,
            (
                name,
                "within bounds" if ok else "WRONG",
                f"{error:.3g}",
                f"{seconds:.1f}",
                f"{peak_gb:.1f}",
            ),
        )
    return print_table(rows, failed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
