"""Numerical check of the refactored baselines against each spec's float64 torch reference.

    ptodsl bench baselines.verify [NAME ...] [--full] [--dims NAME:K=V,K=V ...]
    ptodsl bench baselines.verify --official [NAME ...]

For every example (default: all with a baseline module) this compiles the example spec whose
kernel is NAME
(the six big norms at the reduced CI dims of tests/conftest.py unless --full), draws the
same seeded inputs as `ptodsl check` and checks `benchmarks/baselines/NAME.py`'s ModelNew
with `ptodsl.checking.check.run_check` (graph verification, ptodsl's bounds). Prints: example,
verdict, max abs err, baseline sim us. One SIM at a time.

`--official` checks the official-pattern baselines (`benchmarks/baselines/official/NAME.py`
and its `NAME__<variant>.py` variants) the same way; examples whose official pattern cannot
run at full shape are checked at `official.REDUCED_DIMS` (or the CI dims) unless --full.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import ptodsl
from benchmarks import CI_DIMS, spec_by_kernel
from benchmarks.baselines import official
from ptodsl.checking.check import run_check
from ptodsl.runtime.simulator import SimulationError
from ptodsl.tools.tables import markdown_table
from ptodsl.tools.tuning import probe_cost

HERE = Path(__file__).resolve().parent

SPECS = spec_by_kernel()

# A 32-iteration loop makes pypto's graph verification copy the whole tensors every
# iteration (~5 copies each): at 40M-67M elements that is 20-40 GB. These examples are checked
# numerically at a reduced size (with the loop branch forced); `--full-sim` gives their
# full-size cost without numbers (verify="none").
REDUCED = {
    "matrix_scalar_multiply": {"M": 64, "N": 512},
    "bias_rows_tail": {"M": 99, "N": 200},
    "sum_of_squares": {"N": 2, "C": 4, "H": 32, "W": 32},
}
# Extra runs that push small shapes through the loop branches (BASELINE_MAX_TILES lowered).
FORCED_LOOPS = {
    "matrix_scalar_multiply": ({"M": 64, "N": 512}, 2),
    "bias_rows_tail": ({"M": 99, "N": 200}, 4),
    "sum_of_squares": ({"N": 2, "C": 4, "H": 32, "W": 32}, 0),
    "frobenius_norm": ({"N": 2, "C": 4, "H": 32, "W": 32}, 0),
    "relu": ({"batch_size": 16, "dim": 1000}, 1),
}


def baseline_names(folder: Path = HERE) -> list[str]:
    return sorted(
        official.example_kernel(p)
        for p in folder.glob("*.py")
        if not p.stem.startswith("_") and p.stem != "verify" and "__" not in p.stem
    )


def check(
    name: str,
    dims: dict[str, int] | None,
    timeout: float,
    verify: str = "graph",
    module: Path | None = None,
    own_layout: bool = False,
) -> tuple[str, str, str, str]:
    """Checks `module` (default: benchmarks/baselines/NAME.py) against the example whose
    kernel is NAME; the row is named after the module. own_layout: the module's kernel may
    lay its outputs out differently from ptodsl's kernel (an official-pattern baseline), so
    pypto's own tensor_graph verdict, which compares with the golden in ptodsl's layout, is
    reported (verdict PASS*) but not judged; the outputs are checked element by element."""
    spec = SPECS[name]
    compiled = ptodsl.compile(
        spec.read_text(encoding="utf-8"), name=spec.name, dims=dims, tuning=None
    )
    module = module or HERE / f"{name}.py"
    name = module.stem
    try:
        if verify == "none":
            cost = probe_cost(compiled.lowered, module_path=module)
            return name, "SIM ONLY", "", f"{cost.sim_time_us:.2f}"
        report = run_check(compiled, kernel_path=module, passes=verify, timeout=timeout)
    except SimulationError as error:
        return name, "ERROR: " + str(error).splitlines()[0][:100], "", ""
    problems = [o.problem or f"{o.name}: {o.mismatched} off" for o in report.outputs if not o.ok]
    problems += list(report.problems)
    err = max((o.max_abs_error for o in report.outputs), default=0.0)
    verdict = "PASS" if report.ok else f"FAIL ({'; '.join(problems) or 'a pass failed'})"
    if own_layout and not report.ok and not problems:
        failed = ", ".join(f"{p.pass_name} {p.verdict}" for p in report.passes if not p.ok)
        verdict = f"PASS* (pypto: {failed})"
    err_text = "nan" if math.isnan(err) else f"{err:.3g}"
    return name, verdict, err_text, f"{report.sim_time_us:.2f}"


def parse_dims(items: list[str]) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for item in items:
        name, _, spec = item.partition(":")
        result[name] = {k: int(v) for k, v in (kv.split("=") for kv in spec.split(","))}
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ptodsl bench baselines.verify", description=__doc__.splitlines()[0]
    )
    parser.add_argument("names", nargs="*")
    parser.add_argument("--full", action="store_true", help="full spec dims for the big norms")
    parser.add_argument("--dims", nargs="*", default=[], help="NAME:K=V,K=V overrides")
    parser.add_argument(
        "--full-sim",
        action="store_true",
        help="also simulate the REDUCED ones at full size, no numbers",
    )
    parser.add_argument("--no-forced", action="store_true", help="skip the forced-loop runs")
    parser.add_argument(
        "--official", action="store_true", help="check the official-pattern baselines instead"
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    if args.official:
        return check_official(args)
    names = args.names or baseline_names()
    overrides = parse_dims(args.dims)
    header = ("example", "verdict", "max abs err", "baseline sim us", "dims", "wall s")
    rows = [header]
    failed = 0
    for name in names:
        dims = overrides.get(name) or (None if args.full else CI_DIMS.get(SPECS[name].stem))
        dims = dims or REDUCED.get(name)
        runs = [(dims, None, "graph")]
        if name in FORCED_LOOPS and not args.no_forced:
            runs.append((*FORCED_LOOPS[name], "graph"))
        if args.full_sim and name in REDUCED:
            runs.append((None, None, "none"))
        for run_dims, max_tiles, verify in runs:
            if max_tiles is None:
                os.environ.pop("BASELINE_MAX_TILES", None)
            else:
                os.environ["BASELINE_MAX_TILES"] = str(max_tiles)
            started = time.monotonic()
            row = check(name, run_dims, args.timeout, verify)
            wall = f"{time.monotonic() - started:.0f}"
            dims_text = ",".join(f"{k}={v}" for k, v in run_dims.items()) if run_dims else "spec"
            if max_tiles is not None:
                dims_text += f" (loop forced: max tiles {max_tiles})"
            rows.append((*row, dims_text, wall))
            failed += row[1] not in ("PASS", "SIM ONLY")
            print(" | ".join(rows[-1]), flush=True)
        os.environ.pop("BASELINE_MAX_TILES", None)
    print()
    print(markdown_table(rows[0], rows[1:]), end="")
    return 1 if failed else 0


def check_official(args: argparse.Namespace) -> int:
    """Every official-pattern module of each example, at the example's full dims with --full,
    else at its official.REDUCED_DIMS or CI dims when it has them."""
    names = args.names or baseline_names(official.HERE)
    overrides = parse_dims(args.dims)
    header = ("module", "verdict", "max abs err", "baseline sim us", "dims", "wall s")
    rows = [header]
    failed = 0
    for name in dict.fromkeys(names):
        modules = official.variants(name)
        if not modules:
            raise SystemExit(f"no official baseline for {name}")
        dims = overrides.get(name)
        if dims is None and not args.full:
            dims = official.REDUCED_DIMS.get(name) or CI_DIMS.get(SPECS[name].stem)
        for module in modules:
            started = time.monotonic()
            row = check(name, dims, args.timeout, "graph", module, own_layout=True)
            wall = f"{time.monotonic() - started:.0f}"
            dims_text = ",".join(f"{k}={v}" for k, v in dims.items()) if dims else "spec"
            rows.append((*row, dims_text, wall))
            failed += not row[1].startswith("PASS")
            print(" | ".join(rows[-1]), flush=True)
    print()
    print(markdown_table(rows[0], rows[1:]), end="")
    if any(row[1].startswith("PASS*") for row in rows[1:]):
        print(
            "\nPASS*: every output within ptodsl's bounds; pypto's own graph verdict failed."
            " pypto gets the golden in ptodsl's kernel layout and its comparison disagrees"
            " when the module's output has another last axis (sigmoid: golden [262144],"
            " module [16, 16384]; channel_affine: [4, 8, 256] vs [4, 8, 16, 16]), although"
            " its output and golden data files hold the same values (checked for sigmoid)."
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
