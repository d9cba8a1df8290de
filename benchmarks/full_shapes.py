"""`ptodsl check` of examples at their full shapes, which CI checks scaled down.

    ptodsl bench full_shapes [EXAMPLE ...]

Prints one row per example: verdict, max abs error, simulated time, wall time and the
worker's peak memory. Without arguments it runs every example whose CI check is scaled
down (see tests/conftest.py: CI_DIMS). Large shapes take minutes and many GB each.
"""

from __future__ import annotations

import resource
import sys
import time

import ptodsl
from benchmarks import CI_DIMS, EXAMPLES, add_row, example_names, print_table
from ptodsl.checking.check import run_check
from ptodsl.runtime.simulator import SimulationError

EXAMPLE_BY_STEM = {path.stem: path for path in EXAMPLES}


def main(argv: list[str]) -> int:
    default = "every example CI checks scaled down"
    names = example_names("full_shapes", __doc__, argv, default) or sorted(CI_DIMS)
    header = ("example", "verdict", "max abs err", "sim us", "wall s", "peak worker GB")
    rows = [header]
    failed = 0
    for name in names:
        spec = EXAMPLE_BY_STEM[name]
        compiled = ptodsl.compile(spec.read_text(encoding="utf-8"), name=spec.name)
        started = time.monotonic()
        try:
            report = run_check(compiled)
        except SimulationError as error:
            failed += 1
            add_row(rows, (name, "ERROR: " + str(error).splitlines()[0][:90], "", "", "", ""))
            continue
        wall = time.monotonic() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
        error = max((o.max_abs_error for o in report.outputs), default=0.0)
        failed += not report.ok
        verdict = "PASS" if report.ok else "FAIL"
        timing = (f"{report.sim_time_us:.2f}", f"{wall:.0f}", f"{peak:.1f}")
        add_row(rows, (name, verdict, f"{error:.3g}", *timing))
    return print_table(rows, failed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
